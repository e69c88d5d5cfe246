#include "bootstrap_root.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "log.hpp"
#include "socket.hpp"

namespace nnpccl {

namespace {

// A connection that has not said a valid hello within this time is dropped,
// so a silent port scanner cannot hold a slot.
constexpr int kHelloGraceSec = 10;
// At most this many connections wait for their hello at once; a newer one
// evicts the oldest that has had kHelloChance to speak, read once more
// first. A rank says hello as soon as it connects, so a connection silent
// that long is a stranger; one younger may be a rank its scheduler held
// back, and a flood must not crowd it out. When every waiting connection
// is younger, the newcomer is on probation instead: it is read at the next
// turn and closed if it has still said nothing. So at most twice this
// many descriptors wait (one burst on probation), and a rank that speaks
// within kHelloChance of connecting is never evicted.
constexpr int kMaxConnectionsBeforeHello = 128;
constexpr auto kHelloChance = std::chrono::seconds(1);
// The root gives up on a set-up step this long before the earliest
// deadline of the ranks waiting at it (their hellos say when), so that
// they hear from it which ranks never came, rather than each time out on
// its own knowing only that someone is missing. A rank that leaves a step
// earlier than this before its deadline did not time out: it died or
// aborted.
constexpr auto kSetupMargin = std::chrono::milliseconds(500);

struct Peer {
    int fd = -1;
    std::string peer_name;
    std::string in;
    std::string out;
    Clock::time_point accepted;
    int rank = -1;         // >= 0 once the answer to the challenge was accepted
    bool welcomed = false; // a genuine hello was answered with `challenge`
    Hello hello{};
    Nonce challenge{};
    Clock::time_point setup_deadline = Clock::time_point::max(); // from the hello
    bool has_part = false;
    std::string part;
    bool closing = false; // close once `out` is flushed
    bool said_goodbye = false;
    bool probation = false; // accepted beyond the limit: closed unless it speaks by the next turn
};

class RootServer {
public:
    // The root gives up on joining a little before the deadline of the
    // ranks that share its timeout (that of the process that made the id),
    // so that they hear which rank did not come rather than each timing
    // out on its own.
    RootServer(int listen_fd, JobSecret secret, int join_timeout_sec)
        : listen_fd_(listen_fd), secret_(secret),
          join_deadline_(Deadline::after_seconds(std::max(0.5 * join_timeout_sec, join_timeout_sec - 1.0))) {}
    ~RootServer() {
        for (Peer &p : peers_) close_fd(p.fd);
        close_fd(listen_fd_);
    }
    void run();

private:
    void accept_new();
    // Keeps at most kMaxConnectionsBeforeHello connections waiting for
    // their hello (see there); `evict` closes one of them.
    void make_room();
    void evict(Peer &p);
    void end_probations();
    void read_from(Peer &p);
    void handle_frame(Peer &p, FrameType type, const std::string &payload);
    // Joining, in two steps: a genuine hello earns a welcome and a
    // challenge; the answer to that challenge admits the rank.
    void welcome(Peer &p, FrameType type, const std::string &payload);
    void admit(Peer &p, FrameType type, const std::string &payload);
    void drop(Peer &p, const char *why);
    void fail_job(const std::string &why, nnpccl_result_t code = NNPCCL_ERR_REMOTE);
    void maybe_complete_round();
    // Both leave out `except`: the rank whose failure or departure is
    // being told is named already.
    std::string behind_in_round(int except = -1) const;
    std::string laggards(int except = -1) const;
    // The earliest set-up deadline of the joined ranks (only those waiting
    // at a set-up round, with `in_round`); max() when none.
    Clock::time_point earliest_setup_deadline(bool in_round) const;
    void give_up_before_deadlines();
    void flush(Peer &p);
    int joined_count() const;

    int listen_fd_;
    JobSecret secret_;
    Deadline join_deadline_;
    int nranks_ = 0;
    bool all_joined_ = false;
    std::vector<bool> rank_taken_;
    std::vector<Peer> peers_;
    bool failed_ = false;
    // Why, for the ranks that join after the failure (see run()).
    std::string failure_why_;
    nnpccl_result_t failure_code_ = NNPCCL_ERR_REMOTE;
    long evicted_ = 0; // connections dropped for kMaxConnectionsBeforeHello
    // accept() failed for want of descriptors: the listener, which would
    // stay readable and make every poll return at once, is no longer
    // watched. The root ends once it has told the ranks it took: ranks
    // still queued find their connection closed unwelcomed, later ones
    // find no root and wait out their deadline.
    bool out_of_descriptors_ = false;
};

int RootServer::joined_count() const {
    int n = 0;
    for (const Peer &p : peers_) n += p.rank >= 0 ? 1 : 0;
    return n;
}

void RootServer::drop(Peer &p, const char *why) {
    LOG_WARN("bootstrap root: dropping connection from %s: %s", p.peer_name.c_str(), why);
    close_fd(p.fd);
}

void RootServer::fail_job(const std::string &why, nnpccl_result_t code) {
    if (failed_) return;
    failed_ = true;
    failure_why_ = why;
    failure_code_ = code;
    LOG_WARN("bootstrap root: %s", why.c_str());
    std::vector<Peer *> told;
    for (Peer &p : peers_) {
        if (p.fd < 0 || p.rank < 0) continue;
        std::string payload = encode_failure(code, why);
        p.out += encode_frame(FrameType::Error, payload.data(), payload.size());
        p.closing = true;
        told.push_back(&p);
    }
    // Sent now, highest rank first: this thread lives in a rank's process
    // (rank 0's, usually), which may exit as soon as its own rank hears the
    // news, and the others must have theirs by then.
    std::sort(told.begin(), told.end(), [](const Peer *a, const Peer *b) { return a->rank > b->rank; });
    for (Peer *p : told) flush(*p);
}

void RootServer::accept_new() {
    // A burst at a time, so that closed connections are forgotten (in run())
    // before more are taken.
    for (int burst = 0; burst < kMaxConnectionsBeforeHello; ++burst) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        int fd = accept4(listen_fd_, reinterpret_cast<sockaddr *>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && out_of_resources(errno)) {
            out_of_descriptors_ = true;
            int open = 0;
            for (const Peer &p : peers_) open += p.fd >= 0 ? 1 : 0;
            fail_job(format("the rendezvous root cannot take another rank's connection: %s, with %d open; a job "
                            "of N ranks needs N descriptors in the process that made the unique id: raise its "
                            "limit of open files (ulimit -n)",
                            std::strerror(errno), open),
                     NNPCCL_ERR_SYSTEM);
        }
        if (fd < 0) return;
        watch_for_silent_host(fd);
        Peer p;
        p.fd = fd;
        SockAddr a;
        a.storage = ss;
        a.length = len;
        p.peer_name = a.to_string();
        p.accepted = Clock::now();
        peers_.push_back(std::move(p));
        // A rank says hello as it connects: it is often here already.
        read_from(peers_.back());
        make_room();
    }
}

namespace {

bool waits_for_hello(const Peer &p) { return p.fd >= 0 && p.rank < 0 && !p.welcomed && !p.closing; }

} // namespace

// A welcomed connection sent a hello under the secret and now owes only
// its answer: a flood of strangers never evicts it.
void RootServer::make_room() {
    int waiting = 0;
    for (const Peer &q : peers_) waiting += waits_for_hello(q) && !q.probation ? 1 : 0;
    if (waiting <= kMaxConnectionsBeforeHello) return;
    const Clock::time_point now = Clock::now();
    for (Peer &q : peers_) {
        if (!waits_for_hello(q) || q.probation || now - q.accepted < kHelloChance) continue;
        read_from(q); // its hello may have come since the last turn
        if (waits_for_hello(q)) return evict(q);
        if (--waiting <= kMaxConnectionsBeforeHello) return;
    }
    for (auto q = peers_.rbegin(); q != peers_.rend(); ++q)
        if (waits_for_hello(*q) && !q->probation) {
            q->probation = true;
            return;
        }
}

void RootServer::evict(Peer &p) {
    // Warned once: a flood would otherwise flood the log too.
    if (evicted_++ == 0)
        drop(p, format("%d connections are waiting to say hello, the most kept; later evictions are silent",
                       kMaxConnectionsBeforeHello)
                    .c_str());
    else
        close_fd(p.fd);
}

// After a turn's reads: a connection on probation has had its turn.
void RootServer::end_probations() {
    for (Peer &p : peers_)
        if (p.probation && waits_for_hello(p)) evict(p);
}

void RootServer::welcome(Peer &p, FrameType type, const std::string &payload) {
    Hello hello;
    if (type != FrameType::Hello) return drop(p, "first message is not a hello");
    Status st = decode_hello(payload, &hello);
    if (!st) return drop(p, st.message().c_str());
    if (!hello_is_genuine(secret_, hello))
        return drop(p, "its hello does not prove the job's secret (another job's rank, or a stranger)");
    st = random_bytes(p.challenge.data(), p.challenge.size());
    if (!st) return drop(p, st.message().c_str());
    p.hello = hello;
    p.welcomed = true;
    // Before anything else it hears from us, so a rank trusts nothing an impostor says.
    p.out += encode_welcome(secret_, hello, p.challenge);
}

void RootServer::admit(Peer &p, FrameType type, const std::string &payload) {
    // A hello recorded elsewhere (this run's or an earlier one's with the
    // same secret) is genuine but cannot answer this connection's
    // challenge; refused here, it leaves the rank it copies alone.
    if (type != FrameType::Answer || !answer_is_genuine(secret_, p.hello, p.challenge, payload))
        return drop(p, format("its hello, as rank %u, does not answer this connection's challenge: a hello recorded "
                              "from another connection and sent again, refused",
                              p.hello.rank)
                           .c_str());
    const Hello &hello = p.hello;
    if (failed_) {
        std::string error = encode_failure(failure_code_, failure_why_);
        p.out += encode_frame(FrameType::Error, error.data(), error.size());
        p.closing = true;
        return;
    }
    std::string refusal;
    if (nranks_ == 0) {
        nranks_ = static_cast<int>(hello.nranks);
        rank_taken_.assign(static_cast<size_t>(nranks_), false);
    }
    if (static_cast<int>(hello.nranks) != nranks_)
        refusal = format("rank %u says the job has %u ranks, but rank(s) before it said %d", hello.rank, hello.nranks,
                         nranks_);
    else if (rank_taken_[hello.rank])
        refusal = format("rank %u joined twice", hello.rank);
    else if (all_joined_)
        refusal = "the job has already started";
    if (!refusal.empty()) {
        // It proved the secret afresh, so this is a misconfigured rank of ours: tell it why.
        std::string error = encode_failure(NNPCCL_ERR_INVALID_USAGE, refusal);
        p.out += encode_frame(FrameType::Error, error.data(), error.size());
        p.closing = true;
        // A job that disagrees on its size, or has a rank twice, cannot
        // form: the ranks that joined learn why now, rather than wait
        // for the missing one until their deadline. A rank late for a
        // job that has started leaves that job alone.
        if (!all_joined_)
            fail_job(refusal, NNPCCL_ERR_INVALID_USAGE);
        else
            LOG_WARN("bootstrap root: %s", refusal.c_str());
        return;
    }
    p.rank = static_cast<int>(hello.rank);
    if (hello.setup_ms > 0) p.setup_deadline = Clock::now() + std::chrono::milliseconds(hello.setup_ms);
    rank_taken_[hello.rank] = true;
    if (joined_count() == nranks_) all_joined_ = true;
}

void RootServer::handle_frame(Peer &p, FrameType type, const std::string &payload) {
    if (p.rank < 0) return p.welcomed ? admit(p, type, payload) : welcome(p, type, payload);
    if (type == FrameType::Goodbye) {
        p.said_goodbye = true;
        return;
    }
    if (type == FrameType::Failure) {
        Status st = decode_failure(payload);
        fail_job(format("rank %d failed: %s%s", p.rank, st.message().c_str(), behind_in_round(p.rank).c_str()), st.code());
        return;
    }
    if (type != FrameType::Gather || p.has_part) return drop(p, "unexpected message from a joined rank");
    p.has_part = true;
    p.part = payload;
    maybe_complete_round();
}

// Which joined ranks a set-up round (an allgather) is still waiting for,
// when some have reached it: said with a failure, so that ranks that time
// out at the round, or a rank that gives up there, name the one that never
// came rather than only the one that left. Empty outside such a round.
std::string RootServer::behind_in_round(int except) const {
    const std::string missing = laggards(except);
    if (missing.empty()) return {};
    return "; rank(s) " + missing + " had not reached the set-up step the others were waiting at (stopped, hung, or "
           "calling something else)";
}

// The joined ranks a started set-up round still waits for, as "1,3"; empty
// outside such a round.
std::string RootServer::laggards(int except) const {
    std::string missing;
    bool started = false;
    for (const Peer &p : peers_) {
        if (p.fd < 0 || p.rank < 0 || p.rank == except) continue;
        if (p.has_part) started = true;
        else if (missing.size() < 200) missing += (missing.empty() ? "" : ",") + std::to_string(p.rank);
    }
    return all_joined_ && started ? missing : std::string();
}

Clock::time_point RootServer::earliest_setup_deadline(bool in_round) const {
    Clock::time_point earliest = Clock::time_point::max();
    for (const Peer &p : peers_)
        if (p.fd >= 0 && p.rank >= 0 && (!in_round || p.has_part)) earliest = std::min(earliest, p.setup_deadline);
    return earliest;
}

// Joining, or a set-up round, that will not finish before the deadline of
// a rank waiting at it ends now, naming the ranks that never came.
void RootServer::give_up_before_deadlines() {
    if (failed_ || nranks_ == 0) return;
    const Clock::time_point now = Clock::now();
    auto due = [now](Clock::time_point deadline) {
        return deadline != Clock::time_point::max() && now + kSetupMargin >= deadline;
    };
    if (!all_joined_ && (join_deadline_.passed() || due(earliest_setup_deadline(false)))) {
        std::string missing;
        for (int r = 0; r < nranks_ && missing.size() < 200; ++r)
            if (!rank_taken_[static_cast<size_t>(r)]) missing += (missing.empty() ? "" : ",") + std::to_string(r);
        fail_job(format("rank(s) %s never joined before the deadline", missing.c_str()), NNPCCL_ERR_TIMEOUT);
        return;
    }
    const std::string missing = laggards();
    if (!missing.empty() && due(earliest_setup_deadline(true)))
        fail_job(format("rank(s) %s had not reached the set-up step the others were waiting at by their deadline "
                        "(stopped, hung, or calling something else)",
                        missing.c_str()),
                 NNPCCL_ERR_TIMEOUT);
}

void RootServer::maybe_complete_round() {
    if (!all_joined_ || failed_) return;
    std::vector<std::string> parts(static_cast<size_t>(nranks_));
    int have = 0;
    for (const Peer &p : peers_)
        if (p.fd >= 0 && p.rank >= 0 && p.has_part) {
            parts[static_cast<size_t>(p.rank)] = p.part;
            ++have;
        }
    if (have != nranks_) return;
    std::string payload = encode_gather_result(parts);
    std::string frame = encode_frame(FrameType::GatherResult, payload.data(), payload.size());
    for (Peer &p : peers_)
        if (p.fd >= 0 && p.rank >= 0) {
            p.out += frame;
            p.has_part = false;
            p.part.clear();
        }
}

void RootServer::read_from(Peer &p) {
    char buf[8192];
    while (p.fd >= 0) {
        ssize_t n = recv(p.fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            if (p.rank >= 0) {
                // A rank that said goodbye has destroyed its communicator;
                // one that did not has died or aborted, and every other
                // rank must hear of it rather than wait for it.
                int rank = p.rank;
                bool clean = p.said_goodbye;
                bool silent = n < 0 && errno == ETIMEDOUT;
                // A rank that left while waiting at a set-up step others
                // had not reached, near its deadline, timed out there.
                const bool waiting = p.has_part && Clock::now() + kSetupMargin >= p.setup_deadline;
                const std::string behind = behind_in_round(rank);
                std::string from = p.peer_name;
                close_fd(p.fd);
                if (!clean && silent)
                    fail_job(format("rank %d (connected from %s) went silent: its host stopped answering "
                                    "(powered off, or its network cut)%s",
                                    rank, from.c_str(), behind.c_str()));
                else if (!clean && waiting && !behind.empty())
                    fail_job(format("rank %d (connected from %s) left while waiting at a set-up step (its deadline, "
                                    "or an abort)%s",
                                    rank, from.c_str(), behind.c_str()),
                             NNPCCL_ERR_TIMEOUT);
                else if (!clean)
                    fail_job(format("rank %d (connected from %s) died or aborted%s", rank, from.c_str(),
                                    behind.c_str()));
            } else {
                close_fd(p.fd);
            }
            return;
        }
        if (n < 0) return;
        // A connection being closed has been told why; what it sends after
        // (a rank's allgather part, sent on the heels of its answer) is not read.
        if (!p.closing) p.in.append(buf, static_cast<size_t>(n));
        while (p.fd >= 0 && !p.closing && p.in.size() >= kFrameHeaderBytes) {
            FrameHeader h;
            std::memcpy(&h, p.in.data(), sizeof h);
            size_t limit = p.rank < 0 ? sizeof(Hello) : kMaxRankPayload;
            Status st = check_frame_header(h, limit);
            if (!st) return drop(p, st.message().c_str());
            if (p.in.size() < kFrameHeaderBytes + h.length) break;
            std::string payload = p.in.substr(kFrameHeaderBytes, h.length);
            p.in.erase(0, kFrameHeaderBytes + h.length);
            handle_frame(p, static_cast<FrameType>(h.type), payload);
        }
    }
}

void RootServer::flush(Peer &p) {
    while (p.fd >= 0 && !p.out.empty()) {
        ssize_t n = send(p.fd, p.out.data(), p.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR) close_fd(p.fd);
            return;
        }
        p.out.erase(0, static_cast<size_t>(n));
    }
    if (p.fd >= 0 && p.out.empty() && p.closing) close_fd(p.fd);
}

void RootServer::run() {
    while (true) {
        std::vector<pollfd> fds;
        std::vector<Peer *> owners;
        // A job that failed before every rank joined keeps answering until
        // the join deadline, so that the ranks still on their way learn why
        // rather than find nobody listening and wait for their deadline.
        const bool joining = !all_joined_ && !join_deadline_.passed() && !out_of_descriptors_;
        if (joining) {
            fds.push_back({listen_fd_, POLLIN, 0});
            owners.push_back(nullptr);
        }
        for (Peer &p : peers_) {
            if (p.fd < 0) continue;
            fds.push_back({p.fd, static_cast<short>(POLLIN | (p.out.empty() ? 0 : POLLOUT)), 0});
            owners.push_back(&p);
        }
        int rc = poll(fds.data(), fds.size(), 100);
        if (rc < 0 && errno != EINTR) {
            LOG_WARN("bootstrap root: poll failed: %s", std::strerror(errno));
            break;
        }
        bool can_accept = false;
        for (size_t i = 0; i < fds.size(); ++i) {
            if (fds[i].revents == 0) continue;
            if (owners[i] == nullptr) {
                can_accept = true; // after this loop: accepting grows peers_ under `owners`
                continue;
            }
            Peer &p = *owners[i];
            if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_from(p);
            if (p.fd >= 0 && (fds[i].revents & POLLOUT)) flush(p);
        }
        end_probations();
        if (can_accept) accept_new();
        for (Peer &p : peers_) flush(p);
        auto now = Clock::now();
        for (Peer &p : peers_)
            if (p.fd >= 0 && p.rank < 0 && !p.closing && now - p.accepted > std::chrono::seconds(kHelloGraceSec))
                drop(p, "no hello within the grace period");
        if (!all_joined_ && !failed_ && nranks_ == 0 && join_deadline_.passed())
            fail_job("no rank joined before the deadline", NNPCCL_ERR_TIMEOUT);
        give_up_before_deadlines();
        bool anyone_left = false;
        for (const Peer &p : peers_) anyone_left |= p.fd >= 0;
        if ((all_joined_ || (failed_ && !joining)) && !anyone_left) break;
        // Forget closed connections so the poll set stays small.
        std::vector<Peer> alive;
        for (Peer &p : peers_)
            if (p.fd >= 0) alive.push_back(std::move(p));
        peers_.swap(alive);
    }
    LOG_TRACE("bootstrap root: finished");
}

// The roots this process started: their secrets and the starting pid (a
// forked child inherits the list but not the threads).
std::mutex started_roots_mutex;
std::vector<std::pair<JobSecret, pid_t>> started_roots;

} // namespace

bool process_hosts_bootstrap_root(const JobSecret &secret) {
    std::lock_guard<std::mutex> lock(started_roots_mutex);
    for (const auto &[s, pid] : started_roots)
        if (pid == getpid() && secrets_equal(s, secret)) return true;
    return false;
}

Status start_bootstrap_root(const SockAddr &bind_addr, const JobSecret &secret, int join_timeout_sec,
                            SockAddr *bound) {
    int fd = -1;
    NNPCCL_TRY(listen_tcp(bind_addr, &fd, bound));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    auto server = std::make_unique<RootServer>(fd, secret, join_timeout_sec);
    try {
        std::thread([s = std::move(server)]() mutable { s->run(); }).detach();
    } catch (const std::exception &e) {
        return system_error("cannot start the bootstrap root thread: %s", e.what());
    }
    std::lock_guard<std::mutex> lock(started_roots_mutex);
    started_roots.emplace_back(secret, getpid());
    return Status::ok();
}

} // namespace nnpccl
