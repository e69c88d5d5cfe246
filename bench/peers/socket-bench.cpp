// socket-bench — a reference for ccl-bench's TCP rows: two processes that
// move a collective's bytes over loopback TCP with nothing but send() and
// recv(), no library between them.
//
// Each collective moves the fewest bytes two ranks can: allreduce sends the
// peer's half and receives this rank's, reducing each piece as it lands,
// and sends its reduced half as soon as the input half has gone (the two
// phases of a reduce-scatter and an allgather, overlapped); reduce_scatter
// and allgather are one swap; broadcast and reduce one transfer. Allreduce
// is also timed as one swap of the whole buffer that both ranks reduce
// (twice the bytes, half the round trips: what small sizes want), and the
// row reports the faster of the two. Each rank sends on one connection and
// receives on another, nonblocking, spinning while bytes move and sleeping
// in poll() when they stop; send() and recv() copy straight between the
// caller's buffers and the kernel's, so each byte is copied twice, as in
// any TCP library. What a library adds on top is its own cost; the
// comparison is in docs/performance.md.
//
// Same flags and row format as ccl-bench and the other peers:
//   build/bench/peers/socket-bench allreduce -b 128K -e 64M -f 2 --np 2
// Only two ranks, which it forks itself (--np 2, the default).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "peer_bench.hpp"

namespace {

using namespace peer_bench;

// Spins this many times without progress before poll() sleeps: ranks on
// their own cores answer within it, oversubscribed ones give the core away.
constexpr int kSpinsBeforePoll = 1000;
constexpr int kPollTimeoutMs = 300000; // a peer silent this long has failed

[[noreturn]] void fail(const std::string &what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

// One nonblocking send() or recv() of what is left; false when it moved
// nothing (the socket buffer is full, or empty).
bool send_some(int fd, const void *from, size_t bytes, size_t *done) {
    const ssize_t n = send(fd, static_cast<const char *>(from) + *done, bytes - *done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) fail("send");
    *done += n > 0 ? static_cast<size_t>(n) : 0;
    return n > 0;
}

bool recv_some(int fd, void *into, size_t bytes, size_t *done) {
    const ssize_t n = recv(fd, static_cast<char *>(into) + *done, bytes - *done, MSG_DONTWAIT);
    if (n == 0) {
        errno = ECONNRESET;
        fail("recv: the peer closed the connection");
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) fail("recv");
    *done += n > 0 ? static_cast<size_t>(n) : 0;
    return n > 0;
}

// The two connections between the ranks: this rank sends on one and
// receives on the other. One connection carrying both directions was as
// fast up to 1 MiB and slower from 2 MiB here (docs/performance.md).
struct Link {
    int out = -1;
    int in = -1;
};

// Called after each turn of a transfer loop: spins while turns move bytes,
// and after kSpinsBeforePoll idle ones sleeps until a socket is ready.
void wait_if_idle(const Link &link, bool progressed, bool sending, bool receiving, int *idle) {
    if (progressed || ++*idle < kSpinsBeforePoll) return;
    *idle = 0;
    pollfd p[2] = {{link.out, static_cast<short>(sending ? POLLOUT : 0), 0},
                   {link.in, static_cast<short>(receiving ? POLLIN : 0), 0}};
    const int ready = poll(p, 2, kPollTimeoutMs);
    if (ready == 0) {
        errno = ETIMEDOUT;
        fail("poll");
    }
    if (ready < 0 && errno != EINTR) fail("poll");
}

// Sends `send_bytes` from `out` and receives `recv_bytes` into `in` at the
// same time, so neither side's send waits for the other's receive.
void swap_bytes(const Link &link, const void *out, size_t send_bytes, void *in, size_t recv_bytes) {
    size_t sent = 0, received = 0;
    int idle = 0;
    while (sent < send_bytes || received < recv_bytes) {
        bool progressed = sent < send_bytes && send_some(link.out, out, send_bytes, &sent);
        progressed |= received < recv_bytes && recv_some(link.in, in, recv_bytes, &received);
        wait_if_idle(link, progressed, sent < send_bytes, received < recv_bytes, &idle);
    }
}

// out[i] = first[i] op second[i], one loop per op so each vectorises.
template <typename T, typename Op> void combine(T *out, const T *first, const T *second, size_t count, Op op) {
    for (size_t i = 0; i < count; ++i) out[i] = op(first[i], second[i]);
}

// out = mine op theirs, the lower rank's operand first so both ranks of an
// allreduce compute the same bits.
template <typename T> void reduce_into(RedOp op, int rank, T *out, const T *mine, const T *theirs, size_t count) {
    const T *first = rank == 0 ? mine : theirs;
    const T *second = rank == 0 ? theirs : mine;
    switch (op) {
    case RedOp::Sum: return combine(out, first, second, count, [](T a, T b) { return static_cast<T>(a + b); });
    case RedOp::Prod: return combine(out, first, second, count, [](T a, T b) { return static_cast<T>(a * b); });
    case RedOp::Min: return combine(out, first, second, count, [](T a, T b) { return std::min(a, b); });
    case RedOp::Max: return combine(out, first, second, count, [](T a, T b) { return std::max(a, b); });
    }
}

enum class Way { FewestBytes, OneSwap };

// Allreduce by halves with the phases overlapped, as a library pipelines
// them: the peer's half of the input goes out while this rank's half of
// the peer's input comes in, each piece reduced into `out` as it lands,
// and the reduced half follows on the connection as soon as the input half
// has gone, while the peer's reduced half arrives into `theirs_out`.
template <typename T> void halves_pipelined(const Link &link, const Case &c, const T *theirs_in, size_t theirs_count,
                                            const T *mine_in, T *arrived, T *out, size_t mine_count, T *theirs_out) {
    const size_t input_bytes = theirs_count * sizeof(T), mine_bytes = mine_count * sizeof(T);
    size_t input_sent = 0, arrived_bytes = 0, reduced_count = 0, out_sent = 0, theirs_received = 0;
    int idle = 0;
    while (input_sent < input_bytes || out_sent < mine_bytes || arrived_bytes < mine_bytes ||
           theirs_received < input_bytes) {
        bool progressed = false;
        if (input_sent < input_bytes)
            progressed = send_some(link.out, theirs_in, input_bytes, &input_sent);
        else if (out_sent < reduced_count * sizeof(T))
            progressed = send_some(link.out, out, reduced_count * sizeof(T), &out_sent);
        if (arrived_bytes < mine_bytes)
            progressed |= recv_some(link.in, arrived, mine_bytes, &arrived_bytes);
        else if (theirs_received < input_bytes)
            progressed |= recv_some(link.in, theirs_out, input_bytes, &theirs_received);
        const size_t whole = arrived_bytes / sizeof(T);
        if (whole > reduced_count) {
            reduce_into(c.op, c.rank, out + reduced_count, mine_in + reduced_count, arrived + reduced_count,
                        whole - reduced_count);
            reduced_count = whole;
            progressed = true;
        }
        wait_if_idle(link, progressed, input_sent < input_bytes || out_sent < reduced_count * sizeof(T),
                     arrived_bytes < mine_bytes || theirs_received < input_bytes, &idle);
    }
}

// One call of the collective on two ranks. `scratch` holds what arrives
// before it is reduced.
template <typename T> void collective(const Link &link, const Case &c, Placement placement, Way way,
                                      Buffers<T> &buffers, std::vector<T> &scratch) {
    const bool in_place = placement == Placement::InPlace;
    const int peer = 1 - c.rank;
    T *recv = buffers.recv.data();
    const T *input = in_place ? recv + in_place_input_offset(c.collective, c.layout, c.rank) : buffers.send.data();
    const size_t count = c.layout.send_count;
    switch (c.collective) {
    case Collective::AllReduce: {
        if (way == Way::OneSwap) {
            swap_bytes(link, input, count * sizeof(T), scratch.data(), count * sizeof(T));
            reduce_into(c.op, c.rank, recv, input, scratch.data(), count);
            return;
        }
        // Rank 0 owns the first half, rank 1 the rest.
        const size_t half = count / 2;
        const size_t mine_at = c.rank == 0 ? 0 : half, mine_count = c.rank == 0 ? half : count - half;
        const size_t theirs_at = c.rank == 0 ? half : 0, theirs_count = count - mine_count;
        halves_pipelined(link, c, input + theirs_at, theirs_count, input + mine_at, scratch.data(), recv + mine_at,
                         mine_count, recv + theirs_at);
        return;
    }
    case Collective::ReduceScatter: {
        const size_t block = c.layout.recv_count;
        swap_bytes(link, input + static_cast<size_t>(peer) * block, block * sizeof(T), scratch.data(),
                   block * sizeof(T));
        reduce_into(c.op, c.rank, recv, input + static_cast<size_t>(c.rank) * block, scratch.data(), block);
        return;
    }
    case Collective::AllGather:
        if (!in_place) std::memcpy(recv + static_cast<size_t>(c.rank) * count, input, count * sizeof(T));
        swap_bytes(link, input, count * sizeof(T), recv + static_cast<size_t>(peer) * count, count * sizeof(T));
        return;
    case Collective::Broadcast:
        if (c.rank == c.root) {
            if (!in_place) std::memcpy(recv, input, count * sizeof(T));
            swap_bytes(link, recv, count * sizeof(T), nullptr, 0);
        } else {
            swap_bytes(link, nullptr, 0, recv, count * sizeof(T));
        }
        return;
    case Collective::Reduce:
        if (c.rank == c.root) {
            swap_bytes(link, nullptr, 0, scratch.data(), count * sizeof(T));
            reduce_into(c.op, c.rank, recv, input, scratch.data(), count);
        } else {
            swap_bytes(link, input, count * sizeof(T), nullptr, 0);
        }
        return;
    }
}

template <typename V> V exchanged(const Link &link, V mine) {
    V theirs{};
    swap_bytes(link, &mine, sizeof mine, &theirs, sizeof theirs);
    return theirs;
}

// The slowest rank's average time of one call made `way`; with -c 1 the
// wrong elements of one more call on fresh input are added to *wrong.
template <typename T> double time_way(const Link &link, const Options &opts, const Case &c, Placement placement,
                                      Way way, Buffers<T> &buffers, std::vector<T> &scratch, uint64_t *wrong) {
    prepare_input(c, placement, buffers);
    for (int i = 0; i < opts.warmup_iters; ++i) collective(link, c, placement, way, buffers, scratch);
    exchanged(link, 0); // both start the clock together
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < opts.iters; ++i) collective(link, c, placement, way, buffers, scratch);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    const double mine = elapsed.count() / opts.iters;
    const double slowest = std::max(mine, exchanged(link, mine));
    if (opts.check) {
        prepare_input(c, placement, buffers);
        collective(link, c, placement, way, buffers, scratch);
        const uint64_t here = count_wrong(c, buffers);
        *wrong += here + exchanged(link, here);
    }
    return slowest;
}

template <typename T> void run_group(const Link &link, const Options &opts, const Case &c, Placement placement,
                                     Buffers<T> &buffers, std::vector<T> &scratch, Report &report) {
    uint64_t wrong = 0;
    double seconds = time_way(link, opts, c, placement, Way::FewestBytes, buffers, scratch, &wrong);
    if (c.collective == Collective::AllReduce)
        seconds = std::min(seconds, time_way(link, opts, c, placement, Way::OneSwap, buffers, scratch, &wrong));
    report.group(c, seconds, wrong, opts.check);
}

int run_rank(const Options &opts, int rank, const Link &link) {
    try {
        const int one = 1;
        for (int fd : {link.out, link.in}) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        Report report(rank == 0);
        report.begin("socket-bench: send() and recv() over 127.0.0.1, a connection each way, no library, 2 ranks",
                     opts);
        for (size_t bytes : size_series(opts)) {
            const Case c = case_for(opts, rank, 2, bytes);
            with_type(opts.dtype, [&](auto type) {
                using T = decltype(type);
                Buffers<T> buffers(c.layout);
                std::vector<T> scratch(c.layout.send_count);
                report.begin_row(c);
                run_group(link, opts, c, Placement::OutOfPlace, buffers, scratch, report);
                run_group(link, opts, c, Placement::InPlace, buffers, scratch, report);
                report.end_row();
            });
        }
        return report.finish();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "socket-bench: rank %d: %s\n", rank, e.what());
        return 3;
    }
}

// Rank 0 listens on an ephemeral loopback port before the fork, so rank 1
// connects to a socket that is already there: its first connection carries
// rank 1's sends, its second rank 0's.
int launch_pair(const Options &opts) {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (listener < 0 || bind(listener, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 ||
        listen(listener, 2) != 0 || getsockname(listener, reinterpret_cast<sockaddr *>(&address), &length) != 0) {
        std::perror("socket-bench: listen on 127.0.0.1");
        return 3;
    }
    std::fflush(nullptr); // the child must not repeat the parent's buffered output
    const pid_t child = fork();
    if (child < 0) {
        std::perror("socket-bench: fork");
        return 3;
    }
    if (child == 0) {
        close(listener);
        Link link;
        for (int *fd : {&link.out, &link.in}) {
            *fd = socket(AF_INET, SOCK_STREAM, 0);
            if (*fd < 0 || connect(*fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0) {
                std::perror("socket-bench: rank 1: connect");
                _exit(3);
            }
        }
        const int status = run_rank(opts, 1, link);
        std::fflush(nullptr);
        _exit(status);
    }
    Link link;
    link.in = accept(listener, nullptr, nullptr);
    link.out = link.in < 0 ? -1 : accept(listener, nullptr, nullptr);
    close(listener);
    int status = 3;
    if (link.out < 0)
        std::perror("socket-bench: rank 0: accept");
    else
        status = run_rank(opts, 0, link);
    if (status != 0) kill(child, SIGTERM);
    int child_status = 0;
    if (waitpid(child, &child_status, 0) == child && status == 0)
        status = WIFEXITED(child_status) ? WEXITSTATUS(child_status) : 128 + WTERMSIG(child_status);
    return status;
}

} // namespace

int main(int argc, char **argv) {
    Options opts;
    if (const int status = read_command_line("socket-bench", argc, argv, /*launcher=*/true, &opts); status >= 0)
        return status;
    if (opts.launch_ranks != 0 && opts.launch_ranks != 2) {
        std::fprintf(stderr, "socket-bench: --np %d: it runs exactly 2 ranks\n", opts.launch_ranks);
        return 2;
    }
    if (!opts.store_dir.empty()) {
        std::fprintf(stderr, "socket-bench: --store is not for this tool: it forks its two ranks itself\n");
        return 2;
    }
    if (opts.root > 1) {
        std::fprintf(stderr, "socket-bench: root %d is not a rank of 2\n", opts.root);
        return 2;
    }
    return launch_pair(opts);
}
