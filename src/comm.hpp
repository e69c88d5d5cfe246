// The communicator: who the ranks are, how to reach them (transports), the
// machine model it plans on, its schedule cache and its progress engine.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bootstrap.hpp"
#include "collective.hpp"
#include "config.hpp"
#include "engine.hpp"
#include "schedule_cache.hpp"
#include "topology.hpp"
#include "transport.hpp"
#include "tuner.hpp"

namespace nnpccl {

// What init finds out about the hosts, the same on every rank where the
// planner reads it (agree_on_host_costs).
struct HostFacts {
    int numa_node = -1;   // the rank's NUMA node, for its shm queues (-1: leave to the kernel)
    std::string nic_hint; // the NIC nearest the rank, for ofi when NNPCCL_SOCKET_IFNAME is unset
    // The planner's γ: µs per byte a host sum takes, by element size 1, 2,
    // 4, 8 (reduce.hpp); rank 0's measurement, so every rank plans alike.
    std::array<double, 4> reduce_us_per_byte{};
    // Ranks per core on the most crowded host of the communicator (at
    // least 1); the planner's lockstep term (cost_model.cpp).
    double ranks_per_core = 1;
};

// One collective call as the C API received it.
struct CollectiveCall {
    Collective collective = Collective::Allreduce;
    const void *send = nullptr;
    void *recv = nullptr;
    size_t count = 0;
    nnpccl_datatype_t datatype = NNPCCL_FLOAT32;
    nnpccl_redop_t op = NNPCCL_SUM;
    int root = -1; // and the peer of a send or recv
};

} // namespace nnpccl

struct nnpccl_comm {
    int rank = 0;
    int nranks = 1;
    nnpccl::Settings settings;
    nnpccl::HostFacts facts; // found at init
    // The algorithms NNPCCL_ALGO (or config->algorithms) forces; null when none.
    std::shared_ptr<const nnpccl::AlgoOverride> forced;
    size_t message_bytes = 0; // a transport slot: a chunk and the descriptor ahead of it
    std::unique_ptr<nnpccl::Bootstrap> bootstrap;
    std::vector<std::unique_ptr<nnpccl::Transport>> transports;
    // With link emulation, a decorator over each transport; destroyed first.
    std::vector<std::unique_ptr<nnpccl::Transport>> emulated;
    std::vector<nnpccl::Transport *> route; // by peer: what the executor sends through
    nnpccl::Topology topology;
    std::unique_ptr<nnpccl::Engine> engine;
    std::vector<unsigned char> reduce_scratch; // one chunk; used by whichever thread drives the engine
    uint64_t next_sequence = 0; // of collectives, which every rank counts alike
    // Sends to and receives from each peer, counted per pair: the ranks
    // outside a send/recv pair never see it, so it cannot take a number
    // from next_sequence. Sized nranks at the first send or recv.
    std::vector<uint64_t> sends_to, recvs_from;

    // Planning, which the thread that issues calls and (for calls the
    // tuner decides late) the one that drives the engine both do.
    std::mutex plan_mutex;
    nnpccl::ScheduleCache schedule_cache; // under plan_mutex
    nnpccl::Tuner tuner;                  // the issuing thread's
    // Operations' scratch buffers, kept for the next call (scratch_pool.hpp).
    std::shared_ptr<nnpccl::ScratchPool> scratch_pool = std::make_shared<nnpccl::ScratchPool>();
    // (collective, log2 of the call's bytes) whose choice of algorithm INFO has logged.
    std::set<std::pair<int, int>> logged_plans;

    std::mutex error_mutex;
    std::string last_error;

    // API calls inside the communicator now; abort and destroy wait for them
    // to leave before freeing it, so abort is safe from any thread.
    std::atomic<int> active_calls{0};
    std::atomic<bool> closing{false};

    // A nonblocking init (config->blocking = 0) connects on a thread of its
    // own. Until init_state is Ready, only what prepare() set (rank, nranks,
    // settings) and the error fields may be touched by API calls.
    enum class InitState { Running, Ready, Failed };
    std::atomic<InitState> init_state{InitState::Ready};
    nnpccl::Status init_failure; // written before init_state turns Failed
    std::thread init_thread;
    nnpccl::StopSignal init_stop; // abort raises it to end the init's waits

    // The first step of init, which needs no other rank: checks the config
    // and resolves the settings.
    static nnpccl::Status prepare(int nranks, int rank, const nnpccl_config_t *config,
                                  std::unique_ptr<nnpccl_comm> *out);
    // The rest of init: joins the other ranks at the root in `id` and builds
    // the transports and the engine. Raising `stop` ends its waits at once,
    // and the root is told this rank aborted. On failure it releases
    // whatever it had built.
    nnpccl::Status connect(const nnpccl::UniqueId &id, const nnpccl::StopSignal *stop);

    // The planner's view of a call on this rank.
    nnpccl::CollectiveArgs args_for(const nnpccl::CollectiveCall &call) const;
    // The schedule of the call by the model's (or NNPCCL_ALGO's) choice:
    // from the schedule cache, or planned and cached.
    nnpccl::Status schedule_for(const nnpccl::CollectiveArgs &args, std::shared_ptr<const nnpccl::Schedule> *out);
    // The schedule of `args` by `algorithm`, cached alike.
    nnpccl::Status schedule_with(const nnpccl::AlgorithmInfo &algorithm, const nnpccl::CollectiveArgs &args,
                                 std::shared_ptr<const nnpccl::Schedule> *out);
    // The algorithm the next call like `call` runs, for tools: the tuner's
    // decision, the model's choice where the tuner has none to make, or ""
    // while the tuner is still measuring.
    nnpccl::Status algorithm_for(const nnpccl::CollectiveCall &call, std::string *name);
    // Replaces the algorithms NNPCCL_ALGO (or config->algorithms) forced,
    // between calls, on every rank alike: for tools that run several
    // algorithms on one communicator (ccl-bench --compare).
    void force_algorithms(std::shared_ptr<const nnpccl::AlgoOverride> rules) {
        forced = std::move(rules);
    }
    // How many more calls like `call` the tuner will spend measuring
    // before it has decided (an upper bound while the communicator is in
    // its first calls); the same on every rank. ccl-bench runs them as
    // warm-up, so that its timed calls run the decision.
    size_t tuning_calls_left(const nnpccl::CollectiveCall &call);
    // Queues the call (validated by the caller); returns its operation.
    // Not thread-safe: one thread issues a communicator's calls.
    nnpccl::Status start(const nnpccl::CollectiveCall &call, bool background,
                         std::shared_ptr<nnpccl::Operation> *out);
    void set_last_error(const std::string &message);

    // start()'s parts: a numbered operation with its descriptor (no run
    // yet); its run, with scratch from the pool; and, after a size class's
    // last trial, the tuner's agreement (tuner.hpp).
    std::shared_ptr<nnpccl::Operation> new_operation(const nnpccl::CollectiveCall &call,
                                                     nnpccl::OperationBuffers *buffers);
    void attach_run(nnpccl::Operation &op, std::shared_ptr<const nnpccl::Schedule> schedule,
                    nnpccl::OperationBuffers buffers);
    void agree(const std::shared_ptr<nnpccl::TuningEntry> &tuning, const nnpccl::CollectiveArgs &tuned,
               bool background);
    // The transports the engine drives: the decorators when emulating.
    std::vector<nnpccl::Transport *> active_transports() const;
};

namespace nnpccl {

// The algorithms `planning` forces (NNPCCL_ALGO's syntax); null when none.
// A bad token is an invalid argument naming it and where it came from.
Status parse_forced_algorithms(const PlanningOptions &planning, std::shared_ptr<const AlgoOverride> *out);

// Rank, size and root address from a launcher's environment.
struct LaunchEnv {
    int rank = -1;
    int size = -1;
    std::string launcher; // "torchrun", "Open MPI", "MPICH", "Slurm"
    std::string root;     // host:port
    JobSecret secret{};
    // Set instead of `root` when every rank is on this host and no address
    // was given: rank 0 publishes a unique id in this file (0600).
    std::string rendezvous_file;
};
Status read_launch_env(LaunchEnv *out);

// The file rendezvous of a one-host launch: rank 0 writes the id atomically;
// the others wait for it until the deadline, or until `stop` is raised.
Status publish_unique_id(const std::string &path, const nnpccl_unique_id_t &id);
Status read_unique_id(const std::string &path, const Deadline &deadline, nnpccl_unique_id_t *id,
                      const StopSignal *stop = nullptr);

} // namespace nnpccl
