// The communicator (docs/design.md, "Layers" and "Life of a call"). Its
// two halves, as in NCCL: init (init.cpp) joins the other ranks, learns
// where they run, loads the machine model and opens the transports and
// routes; enqueue (comm.cpp) turns each call into a numbered operation with
// the selector's schedule and hands it to the progress engine.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bootstrap.hpp"
#include "call.hpp"
#include "engine.hpp"
#include "selector.hpp"
#include "settings.hpp"
#include "shared_memory.hpp"
#include "topology.hpp"
#include "trace.hpp"
#include "transport.hpp"

namespace nnpccl {

// What init finds out about the hosts. The planner's part (γ and ranks per
// core) is the same on every rank: rank 0's measurement and the most
// crowded host, so that every rank plans alike.
struct HostFacts {
    int numa_node = -1;   // the rank's NUMA node, for its shm queues (-1: leave to the kernel)
    std::string nic_hint; // the NIC nearest the rank, for ofi when NNPCCL_SOCKET_IFNAME is unset
    int local_ranks = 1;  // ranks on this rank's host
    CostInputs costs;
};

} // namespace nnpccl

struct nnpccl_comm {
    int rank = 0;
    int nranks = 1;
    nnpccl::Settings settings;
    // The algorithms NNPCCL_ALGO (or config->algorithms) forces; null when
    // none. The selector starts with them; nnpccl_comm_set_algorithms(NULL)
    // returns to them.
    std::shared_ptr<const nnpccl::AlgoOverride> configured_algorithms;
    size_t message_bytes = 0; // a transport slot: a chunk and the descriptor ahead of it
    // The timeline NNPCCL_TRACE asks for (src/trace.hpp), made by prepare();
    // null without one. Every operation's run records into it; destroy, or
    // the destructor after an abort, writes it.
    std::shared_ptr<nnpccl::TraceRecorder> trace;

    // Made by init (init.cpp), in this order; released in reverse.
    std::unique_ptr<nnpccl::Bootstrap> bootstrap;
    nnpccl::HostFacts facts;
    nnpccl::Topology topology;
    std::unique_ptr<nnpccl::Selector> selector;
    std::vector<std::unique_ptr<nnpccl::Transport>> transports;
    // With link emulation: each simulated link's busy intervals, shared by
    // the ranks of this host (the emulated transports point into it), and a
    // decorator over each transport; destroyed first.
    nnpccl::SharedRegion link_table;
    std::vector<std::unique_ptr<nnpccl::Transport>> emulated;
    std::vector<nnpccl::Transport *> route; // by peer: what the executor sends through
    std::unique_ptr<nnpccl::Engine> engine;

    // Enqueue's state (comm.cpp), the issuing thread's.
    std::vector<unsigned char> reduce_scratch; // one chunk; used by whichever thread drives the engine
    uint64_t next_sequence = 0; // of collectives, which every rank counts alike
    // Sends to and receives from each peer, counted per pair: the ranks
    // outside a send/recv pair never see it, so it cannot take a number
    // from next_sequence. Sized nranks at the first send or recv.
    std::vector<uint64_t> sends_to, recvs_from;
    // Operations' scratch buffers, kept for the next call (scratch_pool.hpp).
    std::shared_ptr<nnpccl::ScratchPool> scratch_pool = std::make_shared<nnpccl::ScratchPool>();

    std::mutex error_mutex;
    std::string last_error;

    // API calls inside the communicator now; abort and destroy wait for them
    // to leave before freeing it, so abort is safe from any thread.
    std::atomic<int> active_calls{0};
    std::atomic<bool> closing{false};
    // The process that created it (api_support.hpp, used_after_fork): a
    // fork's child shares its transports but must never use them.
    pid_t creator_pid = 0;

    // A nonblocking init (config->blocking = 0) connects on a thread of its
    // own. Until init_state is Ready, only what prepare() set (rank, nranks,
    // settings) and the error fields may be touched by API calls.
    enum class InitState { Running, Ready, Failed };
    std::atomic<InitState> init_state{InitState::Ready};
    nnpccl::Status init_failure; // written before init_state turns Failed
    std::thread init_thread;
    nnpccl::StopSignal init_stop; // abort raises it to end the init's waits

    nnpccl_comm() = default;
    nnpccl_comm(const nnpccl_comm &) = delete;
    nnpccl_comm &operator=(const nnpccl_comm &) = delete;
    // With a timeline not written yet (an abort), stops the engine first and
    // then writes it (comm.cpp).
    ~nnpccl_comm();

    // Init (init.cpp). The first step, which needs no other rank: checks
    // the config and resolves the settings.
    static nnpccl::Status prepare(int nranks, int rank, const nnpccl_config_t *config,
                                  std::unique_ptr<nnpccl_comm> *out);
    // The rest: joins the other ranks at the root in `id` and builds the
    // transports and the engine. Raising `stop` ends its waits at once,
    // and the root is told this rank aborted. On failure it releases
    // whatever it had built.
    nnpccl::Status connect(const nnpccl::UniqueId &id, const nnpccl::StopSignal *stop);

    // Enqueue (comm.cpp). Completes a call the C API made from its
    // arguments with what the communicator knows (rank, ranks, chunk,
    // element size, in place).
    void complete(nnpccl::Call *call) const {
        nnpccl::complete_call(call, rank, nranks, settings.planning.chunk_bytes);
    }
    // Queues a completed, validated call; returns its operation. Not
    // thread-safe: one thread issues a communicator's calls.
    nnpccl::Status start(const nnpccl::Call &call, bool background, std::shared_ptr<nnpccl::Operation> *out);
    // Runs a completed, validated blocking call to its end. Where the
    // engine has nothing queued and the call needs nothing but its
    // schedule, it runs on this thread with no operation queued
    // (Engine::run_alone, in the one reused `blocking_run`); otherwise it
    // is started and waited for.
    nnpccl::Status run_blocking(const nnpccl::Call &call);
    void set_last_error(const std::string &message);
    // The transports the engine drives: the decorators when emulating.
    std::vector<nnpccl::Transport *> active_transports() const;

private:
    // start()'s parts: a numbered operation with its announcement (no run
    // yet); its run, with scratch from the pool; and, after a size class's
    // last trial, the tuner's agreement (tuner.hpp).
    std::shared_ptr<nnpccl::Operation> new_operation(const nnpccl::Call &call, nnpccl::Announcement *announcement);
    // Gives the call its sequence number, its announcement and its name.
    void number(const nnpccl::Call &call, nnpccl::Announcement *announcement, nnpccl::OperationName *name);
    nnpccl::Status start_planned(const nnpccl::Call &call, nnpccl::Plan plan, bool background,
                                 std::shared_ptr<nnpccl::Operation> *out);
    // The blocking calls' run, used under the engine's drive lock only, and
    // the shape of call its schedule was planned for while the selector's
    // choice for it is settled: a loop of like calls asks the selector
    // nothing.
    std::unique_ptr<nnpccl::ScheduleRun> blocking_run;
    // The schedule cache's key of the planner's choice, and the selector's
    // generation it was planned under.
    using PlannedShape = std::pair<nnpccl::ScheduleCache::Key, uint64_t>;
    std::optional<PlannedShape> blocking_shape; // none while the choice is not settled
    nnpccl::Status start_and_wait(const nnpccl::Call &call, nnpccl::Plan plan);
    void attach_run(nnpccl::Operation &op, std::shared_ptr<const nnpccl::Schedule> schedule,
                    const nnpccl::Call &call, const nnpccl::Announcement &announcement);
    void agree(const std::shared_ptr<nnpccl::TuningEntry> &tuning, const nnpccl::CollectiveArgs &tuned,
               bool background);
};
