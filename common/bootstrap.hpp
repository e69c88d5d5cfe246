// A rank's side of the bootstrap: joins the job at the root and runs
// allgather rounds through it. Used during communicator setup (to exchange
// host identity and transport addresses) and for out-of-band agreement.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap_wire.hpp"
#include "deadline.hpp"

namespace nnpccl {

class Bootstrap {
public:
    // Connects to the root in `id` and joins as `rank` of `nranks`. Retries a
    // root that is not listening yet until the deadline. Raising `stop` ends
    // this and every later allgather wait at once (a nonblocking init's
    // abort); it must outlive the Bootstrap.
    static Status join(const UniqueId &id, int rank, int nranks, const Deadline &deadline,
                       std::unique_ptr<Bootstrap> *out, const StopSignal *stop = nullptr);
    ~Bootstrap();
    Bootstrap(const Bootstrap &) = delete;
    Bootstrap &operator=(const Bootstrap &) = delete;

    // Every rank contributes `mine` (at most 64 KiB); all parts come back in rank order.
    Status allgather(const std::string &mine, const Deadline &deadline, std::vector<std::string> *all);
    Status barrier(const Deadline &deadline);

    // Without waiting: NNPCCL_ERR_REMOTE when the root has reported a rank
    // dead or aborted, or when the root has gone away and its process was a
    // rank's (set_root_host): that rank is gone. A root that was not a
    // rank's is not missed (its process may simply have finished);
    // transports and deadlines cover that case. `between_calls`: the
    // check of a communicator that makes no call (Engine::
    // check_peers_between_calls), where a root host's closed connection is
    // not yet an error: that rank may have finished the job and destroyed
    // its communicator cleanly, as this one is about to. The next call's
    // check reports it.
    Status check_job(bool between_calls = false);
    // Whether this process started the job's root (process_hosts_bootstrap_root).
    bool process_hosts_root() const { return hosts_root_; }
    // The rank whose process hosts the root (-1: none), as the ranks agreed
    // at init; set before any thread calls check_job().
    void set_root_host(int rank) { root_host_ = rank; }
    // Tells the root, which tells every rank, that this rank's communicator failed and why.
    void report_failure(const Status &why);
    // Tells the root this rank leaves cleanly (before destroy closes the connection).
    void say_goodbye();

    int rank() const { return rank_; }
    int nranks() const { return nranks_; }
    const std::string &root_name() const { return root_name_; }

private:
    Bootstrap(int fd, int rank, int nranks, std::string root_name, const StopSignal *stop, bool hosts_root)
        : fd_(fd), rank_(rank), nranks_(nranks), root_name_(std::move(root_name)), stop_(stop),
          hosts_root_(hosts_root) {}
    Status root_host_lost() const;
    int fd_;
    // Set by whichever thread first hears the root close; read by all.
    std::atomic<bool> root_gone_{false};
    std::atomic<bool> root_silent_{false}; // gone by timeout, not by a close
    int rank_;
    int nranks_;
    std::string root_name_;
    const StopSignal *stop_;
    bool hosts_root_;
    int root_host_ = -1;
};

} // namespace nnpccl
