// The communicator (docs/design.md, "Layers" and "Life of a call"). Its
// two halves, as in NCCL: init (init.cpp) joins the other ranks, learns
// where they run, loads the machine model and opens the transports and
// routes; enqueue (comm.cpp) turns each call into a numbered operation with
// the selector's schedule and hands it to the progress engine. The C API
// (api*.cpp, inspect.cpp) sees only its member functions.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <functional>
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
#include "links.hpp"
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

class Init; // init.cpp: the steps that build a communicator

} // namespace nnpccl

// A communicator's state is its own: init (the friend class Init) builds
// it, enqueue (comm.cpp) numbers and queues calls, and the C API asks and
// tells it through the member functions below (comm_lifecycle.cpp).
struct nnpccl_comm {
public:
    nnpccl_comm() = default;
    nnpccl_comm(const nnpccl_comm &) = delete;
    nnpccl_comm &operator=(const nnpccl_comm &) = delete;
    // With a timeline not written yet (an abort), stops the engine first and
    // then writes it (comm_lifecycle.cpp).
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

    // A nonblocking init (config->blocking = 0) runs `connect` on a thread
    // of its own. Until init_state() is Ready, only rank(), nranks(),
    // settings() and the errors may be asked.
    using ConnectStep = std::function<nnpccl::Status(nnpccl_comm &, const nnpccl::StopSignal *)>;
    nnpccl::Status connect_in_background(ConnectStep connect);
    enum class InitState { Running, Ready, Failed };
    InitState init_state() const { return init_state_.load(std::memory_order_acquire); }
    bool ready() const { return init_state() == InitState::Ready; }
    const nnpccl::Status &init_failure() const { return init_failure_; } // once Failed
    // Ends a running init's waits and waits for its thread: the init state
    // is final afterwards.
    void stop_init();

    int rank() const { return rank_; }
    int nranks() const { return nranks_; }
    const nnpccl::Settings &settings() const { return settings_; }
    // The process that created it (api_support.hpp, used_after_fork): a
    // fork's child shares its transports but must never use them.
    pid_t creator_pid() const { return creator_pid_; }

    // The message nnpccl_get_last_error gives for it: the last failure, or
    // a failed nonblocking init's. The pointer holds until the next call.
    void set_last_error(const std::string &message);
    const char *last_error();
    std::string last_error_copy();

    // API calls inside the communicator now (api_support.hpp's LiveComms
    // counts nested holds here); abort and destroy wait for them to leave
    // before freeing it, so abort is safe from any thread.
    void call_entered() { active_calls_.fetch_add(1); }
    void call_left() { active_calls_.fetch_sub(1); }
    bool calls_inside() const { return active_calls_.load() > 0; }
    bool closing() const { return closing_.load(); }
    // Marks it closing (destroy, abort); false when it already was.
    bool begin_closing() { return !closing_.exchange(true); }

    // Destroy's orderly end of a ready communicator: lets the last messages
    // leave, says goodbye to the root, writes the timeline (NNPCCL_TRACE).
    nnpccl::Status close();
    // Fails a ready communicator's engine with `why` (abort, a call that
    // failed outside the engine); every queued operation fails with it.
    void abort(const nnpccl::Status &why);
    // The same from a signal handler, with only async-signal-safe steps:
    // asks the engine to fail at its next turn, or ends a running init's
    // waits.
    void request_abort();
    // The engine's first failure (OK while there is none), after a look at
    // the peers where one is due.
    nnpccl::Status async_error();
    bool failed() const { return engine_->failed(); }
    nnpccl::Status failure() const { return engine_->failure(); }
    bool idle() const { return engine_->idle(); }
    nnpccl::Status wait(nnpccl::Operation &op) { return engine_->wait(op); }

    // Enqueue (comm.cpp). Completes a call the C API made from its
    // arguments with what the communicator knows (rank, ranks, chunk,
    // element size, in place).
    void complete(nnpccl::Call *call) const {
        nnpccl::complete_call(call, rank_, nranks_, settings_.planning.chunk_bytes);
    }
    // Queues a completed, validated call; returns its operation. Not
    // thread-safe: one thread issues a communicator's calls.
    nnpccl::Status start(const nnpccl::Call &call, bool background, std::shared_ptr<nnpccl::Operation> *out);
    // Runs a completed, validated blocking call to its end. Where the
    // engine has nothing queued and the call needs nothing but its
    // schedule, it runs on this thread with no operation queued
    // (Engine::run_alone, in the one reused `blocking_run_`); otherwise it
    // is started and waited for.
    nnpccl::Status run_blocking(const nnpccl::Call &call);
    // A blocking collective of no elements with nothing queued (api.cpp,
    // only_takes_its_number): it takes its number and moves nothing.
    void number_empty_call() { ++next_sequence_; }

    // The algorithms nnpccl_comm_set_algorithms forces from the next call
    // on; null returns to those of NNPCCL_ALGO or config->algorithms.
    void force_algorithms(std::shared_ptr<const nnpccl::AlgoOverride> forced);
    const std::shared_ptr<const nnpccl::AlgoOverride> &configured_algorithms() const { return configured_algorithms_; }
    // The algorithm the next call like `call` would run, and how many calls
    // of its size class the tuner has still to time.
    nnpccl::Status next_algorithm(const nnpccl::Call &call, std::string *name, size_t *tuning_calls_left);

private:
    friend class nnpccl::Init;

    int rank_ = 0;
    int nranks_ = 1;
    nnpccl::Settings settings_;
    // The algorithms NNPCCL_ALGO (or config->algorithms) forces; null when
    // none. The selector starts with them.
    std::shared_ptr<const nnpccl::AlgoOverride> configured_algorithms_;
    size_t message_bytes_ = 0; // a transport slot: a chunk and the descriptor ahead of it
    // The timeline NNPCCL_TRACE asks for (src/trace.hpp), made by prepare();
    // null without one. Every operation's run records into it; close(), or
    // the destructor after an abort, writes it.
    std::shared_ptr<nnpccl::TraceRecorder> trace_;

    // Made by init (init.cpp), in this order; released in reverse.
    std::unique_ptr<nnpccl::Bootstrap> bootstrap_;
    nnpccl::HostFacts facts_;
    nnpccl::Topology topology_;
    std::unique_ptr<nnpccl::Selector> selector_;
    nnpccl::Links links_;
    std::unique_ptr<nnpccl::Engine> engine_;

    // Enqueue's state (comm.cpp), the issuing thread's.
    std::vector<unsigned char> reduce_scratch_; // one chunk; used by whichever thread drives the engine
    uint64_t next_sequence_ = 0;                // of collectives, which every rank counts alike
    // Sends to and receives from each peer, counted per pair: the ranks
    // outside a send/recv pair never see it, so it cannot take a number
    // from next_sequence_. Sized nranks at the first send or recv.
    std::vector<uint64_t> sends_to_, recvs_from_;
    // Operations' scratch buffers, kept for the next call (scratch_pool.hpp).
    std::shared_ptr<nnpccl::ScratchPool> scratch_pool_ = std::make_shared<nnpccl::ScratchPool>();
    // The blocking calls' run, used under the engine's drive lock only, and
    // the shape of call its schedule was planned for while the selector's
    // choice for it is settled: a loop of like calls asks the selector
    // nothing. The shape is the schedule cache's key of the planner's
    // choice and the selector's generation it was planned under.
    std::unique_ptr<nnpccl::ScheduleRun> blocking_run_;
    using PlannedShape = std::pair<nnpccl::ScheduleCache::Key, uint64_t>;
    std::optional<PlannedShape> blocking_shape_; // none while the choice is not settled

    // The C API's side (comm_lifecycle.cpp).
    std::mutex error_mutex_;
    std::string last_error_;
    std::atomic<int> active_calls_{0};
    std::atomic<bool> closing_{false};
    pid_t creator_pid_ = 0;
    std::atomic<InitState> init_state_{InitState::Ready};
    nnpccl::Status init_failure_; // written before init_state_ turns Failed
    std::thread init_thread_;
    nnpccl::StopSignal init_stop_; // stop_init() and request_abort() raise it to end the init's waits

    // start()'s parts: a numbered operation with its announcement (no run
    // yet); its run, with scratch from the pool; and, after a size class's
    // last trial, the tuner's agreement (tuner.hpp).
    std::shared_ptr<nnpccl::Operation> new_operation(const nnpccl::Call &call, nnpccl::Announcement *announcement);
    // Gives the call its sequence number, its announcement and its name.
    void number(const nnpccl::Call &call, nnpccl::Announcement *announcement, nnpccl::OperationName *name);
    nnpccl::Status start_planned(const nnpccl::Call &call, nnpccl::Plan plan, bool background,
                                 std::shared_ptr<nnpccl::Operation> *out);
    nnpccl::Status start_and_wait(const nnpccl::Call &call, nnpccl::Plan plan);
    void attach_run(nnpccl::Operation &op, std::shared_ptr<const nnpccl::Schedule> schedule,
                    const nnpccl::Call &call, const nnpccl::Announcement &announcement);
    void agree(const std::shared_ptr<nnpccl::TuningEntry> &tuning, const nnpccl::CollectiveArgs &tuned,
               bool background);
};
