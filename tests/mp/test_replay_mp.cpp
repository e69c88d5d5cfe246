// A hello (and what follows it) recorded from a real rank's connection and
// sent again to a root with the same secret, of a later run or of the same
// run during its init: the root refuses it, says so in its log, and the
// job forms. Real processes over 127.0.0.1: each root runs in a child of
// its own, rank 1 reaches its root through a recording relay (another
// child), and the test process starts no thread.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap_root.hpp"
#include "bootstrap_wire.hpp"
#include "nnpccl.h"

using namespace nnpccl;

namespace {

using Clock = std::chrono::steady_clock;

SockAddr loopback_any_port() {
    SockAddr a;
    REQUIRE(resolve_host("127.0.0.1", 0, &a).is_ok());
    return a;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
}

// Runs `child` in a forked process that reports a port back through a pipe
// and lives until the parent closes `*keep_alive`.
template <typename Child> pid_t fork_service(Child child, uint16_t *port, int *keep_alive) {
    int report[2], alive[2];
    REQUIRE(pipe(report) == 0);
    REQUIRE(pipe(alive) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(report[0]);
        close(alive[1]);
        child(report[1], alive[0]);
        _exit(0);
    }
    close(report[1]);
    close(alive[0]);
    uint16_t got = 0;
    REQUIRE(read(report[0], &got, sizeof got) == static_cast<ssize_t>(sizeof got));
    close(report[0]);
    *port = got;
    *keep_alive = alive[1];
    return pid;
}

// A rendezvous root with `secret` in a child whose log (stderr) goes to `log`.
pid_t start_root(const JobSecret &secret, const std::string &log, uint16_t *port, int *keep_alive) {
    return fork_service(
        [&](int report, int alive) {
            int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd >= 0) dup2(fd, STDERR_FILENO);
            SockAddr bound;
            uint16_t p = 0;
            if (start_bootstrap_root(loopback_any_port(), secret, 30, &bound).is_ok()) p = bound.port();
            (void)!write(report, &p, sizeof p);
            char byte;
            while (read(alive, &byte, 1) > 0) {
            }
        },
        port, keep_alive);
}

// A relay in front of the root at `root_port`: it takes one connection,
// forwards both ways, and appends what the rank sends to `record`.
pid_t start_recorder(uint16_t root_port, const std::string &record, uint16_t *port, int *keep_alive) {
    return fork_service(
        [&](int report, int) {
            int listener = -1;
            SockAddr bound;
            uint16_t p = 0;
            if (listen_tcp(loopback_any_port(), &listener, &bound).is_ok()) p = bound.port();
            (void)!write(report, &p, sizeof p);
            int rank = accept(listener, nullptr, nullptr);
            SockAddr root = loopback_any_port();
            root.set_port(root_port);
            int upstream = socket(AF_INET, SOCK_STREAM, 0);
            if (rank < 0 || connect(upstream, reinterpret_cast<const sockaddr *>(&root.storage), root.length) != 0)
                _exit(1);
            int out = open(record.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            pollfd fds[2] = {{rank, POLLIN, 0}, {upstream, POLLIN, 0}};
            char buf[65536];
            while (poll(fds, 2, -1) > 0) {
                for (int i = 0; i < 2; ++i) {
                    if (fds[i].revents == 0) continue;
                    ssize_t n = read(fds[i].fd, buf, sizeof buf);
                    if (n <= 0) _exit(0);
                    if (i == 0) (void)!write(out, buf, static_cast<size_t>(n));
                    (void)!write(i == 0 ? upstream : rank, buf, static_cast<size_t>(n));
                }
            }
        },
        port, keep_alive);
}

void stop_service(pid_t pid, int keep_alive) {
    close(keep_alive);
    int status = 0;
    waitpid(pid, &status, 0);
}

// A rank of `nranks` joining at 127.0.0.1:`port` with `secret`: an
// allreduce of rank + 1, checked. Exits 0 when all went well.
pid_t start_rank(int rank, int nranks, uint16_t port, const JobSecret &secret) {
    UniqueId id;
    id.root = loopback_any_port();
    id.root.set_port(port);
    id.secret = secret;
    nnpccl_unique_id_t raw;
    encode_unique_id(id, &raw);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid != 0) return pid;
    nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
    cfg.timeout_sec = 20;
    nnpccl_comm_t comm = nullptr;
    if (nnpccl_comm_init_rank(&comm, nranks, raw, rank, &cfg) != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "rank %d: init failed: %s\n", rank, nnpccl_get_last_error(nullptr));
        _exit(1);
    }
    int32_t mine = rank + 1, sum = 0;
    const bool ok = nnpccl_allreduce(&mine, &sum, 1, NNPCCL_INT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS &&
                    sum == nranks * (nranks + 1) / 2;
    if (!ok)
        std::fprintf(stderr, "rank %d: allreduce failed or wrong (%d): %s\n", rank, sum, nnpccl_get_last_error(comm));
    _exit(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS && ok ? 0 : 1);
}

int exit_status(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// What the root did with `bytes` sent on a connection of their own: the
// frame types it answered with, whether it closed the connection, and when.
struct ReplayOutcome {
    std::vector<uint32_t> frames;
    bool closed = false;
    double seconds = 0;
};

ReplayOutcome replay(uint16_t port, const std::string &bytes) {
    SockAddr root = loopback_any_port();
    root.set_port(port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(connect(fd, reinterpret_cast<const sockaddr *>(&root.storage), root.length) == 0);
    const auto start = Clock::now();
    REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    std::string got;
    ReplayOutcome outcome;
    // A root that took the replay keeps the connection open: give up after 3 s.
    while (Clock::now() - start < std::chrono::seconds(3)) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) {
            outcome.closed = true;
            break;
        }
        got.append(buf, static_cast<size_t>(n));
    }
    outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    close(fd);
    for (size_t at = 0; got.size() - at >= sizeof(FrameHeader);) {
        FrameHeader h;
        std::memcpy(&h, got.data() + at, sizeof h);
        outcome.frames.push_back(h.type);
        at += sizeof h + h.length;
        if (at > got.size()) break;
    }
    return outcome;
}

// Waits until `path` holds at least `min_bytes` and has not grown for 300 ms.
std::string settled_recording(const std::string &path, size_t min_bytes) {
    std::string last;
    auto since = Clock::now();
    for (auto start = Clock::now(); Clock::now() - start < std::chrono::seconds(20);) {
        std::string now = read_file(path);
        if (now != last) {
            last = now;
            since = Clock::now();
        } else if (last.size() >= min_bytes && Clock::now() - since > std::chrono::milliseconds(300)) {
            return last;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return last;
}

struct ScratchDir {
    char path[48] = "/tmp/nnpccl-test-replay-XXXXXX";
    ScratchDir() { REQUIRE(mkdtemp(path) != nullptr); }
    ~ScratchDir() {
        for (const char *name : {"/record", "/root1.log", "/root2.log"}) unlink((std::string(path) + name).c_str());
        rmdir(path);
    }
    std::string operator/(const char *name) const { return std::string(path) + "/" + name; }
};

void check_refused(const ReplayOutcome &outcome, const std::string &root_log) {
    std::fprintf(stderr, "replay %s after %.3f s\n", outcome.closed ? "closed by the root" : "still open",
                 outcome.seconds);
    INFO("root's log: " << root_log);
    CHECK(outcome.closed);
    CHECK(outcome.seconds < 2);
    for (uint32_t type : outcome.frames) {
        INFO("frame type " << type);
        CHECK(type == static_cast<uint32_t>(FrameType::Welcome)); // nothing of the job's
    }
    CHECK_THAT(root_log, Catch::Contains("does not answer this connection's challenge"));
    CHECK_THAT(root_log, Catch::Contains("refused"));
    CHECK_THAT(root_log, !Catch::Contains("joined twice"));
}

} // namespace

TEST_CASE("a hello recorded from an earlier run is refused by a later run with the same secret, and the job forms",
          "[mp][bootstrap][replay]") {
    ScratchDir dir;
    JobSecret secret;
    REQUIRE(random_secret(&secret).is_ok());
    // Run 1, rank 1's bytes recorded on their way to the root.
    uint16_t root_port = 0, relay_port = 0;
    int root_alive = -1, relay_alive = -1;
    const pid_t root = start_root(secret, dir / "root1.log", &root_port, &root_alive);
    REQUIRE(root_port != 0);
    const pid_t relay = start_recorder(root_port, dir / "record", &relay_port, &relay_alive);
    const pid_t first0 = start_rank(0, 2, root_port, secret), first1 = start_rank(1, 2, relay_port, secret);
    CHECK(exit_status(first0) == 0);
    CHECK(exit_status(first1) == 0);
    stop_service(relay, relay_alive);
    stop_service(root, root_alive);
    const std::string recorded = read_file(dir / "record");
    REQUIRE(recorded.size() >= sizeof(FrameHeader) + sizeof(Hello));

    // Run 2, same secret: the recording reaches the root before the real rank 1.
    const pid_t later = start_root(secret, dir / "root2.log", &root_port, &root_alive);
    REQUIRE(root_port != 0);
    const ReplayOutcome outcome = replay(root_port, recorded);
    const pid_t rank0 = start_rank(0, 2, root_port, secret), rank1 = start_rank(1, 2, root_port, secret);
    CHECK(exit_status(rank0) == 0);
    CHECK(exit_status(rank1) == 0);
    stop_service(later, root_alive);
    check_refused(outcome, read_file(dir / "root2.log"));
}

TEST_CASE("a hello recorded during a live init and sent again is refused, and the job forms",
          "[mp][bootstrap][replay]") {
    ScratchDir dir;
    JobSecret secret;
    REQUIRE(random_secret(&secret).is_ok());
    uint16_t root_port = 0, relay_port = 0;
    int root_alive = -1, relay_alive = -1;
    const pid_t root = start_root(secret, dir / "root1.log", &root_port, &root_alive);
    REQUIRE(root_port != 0);
    const pid_t relay = start_recorder(root_port, dir / "record", &relay_port, &relay_alive);
    // Ranks 0 and 1 join and wait at the first set-up step for rank 2, which
    // starts only once rank 1's hello has been sent again.
    const pid_t rank0 = start_rank(0, 3, root_port, secret), rank1 = start_rank(1, 3, relay_port, secret);
    const std::string recorded = settled_recording(dir / "record", sizeof(FrameHeader) + sizeof(Hello));
    REQUIRE(recorded.size() >= sizeof(FrameHeader) + sizeof(Hello));
    const ReplayOutcome outcome = replay(root_port, recorded);
    const pid_t rank2 = start_rank(2, 3, root_port, secret);
    CHECK(exit_status(rank0) == 0);
    CHECK(exit_status(rank1) == 0);
    CHECK(exit_status(rank2) == 0);
    stop_service(relay, relay_alive);
    stop_service(root, root_alive);
    check_refused(outcome, read_file(dir / "root1.log"));
}

TEST_CASE("a rank slow to say hello is not crowded out by a flood of silent connections", "[mp][bootstrap]") {
    // The rank's connection is taken, then 200 silent ones arrive at once
    // before its hello: more than the 128 the root keeps waiting. The
    // rank had less than a second to speak, so the flood is refused
    // instead, and the hello, when it comes, is welcomed.
    ScratchDir dir;
    JobSecret secret;
    REQUIRE(random_secret(&secret).is_ok());
    uint16_t root_port = 0;
    int root_alive = -1;
    const pid_t root = start_root(secret, dir / "root1.log", &root_port, &root_alive);
    REQUIRE(root_port != 0);
    SockAddr at = loopback_any_port();
    at.set_port(root_port);
    auto connect_to_root = [&at] {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(connect(fd, reinterpret_cast<const sockaddr *>(&at.storage), at.length) == 0);
        return fd;
    };
    const int slow = connect_to_root();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<int> flood;
    for (int i = 0; i < 200; ++i) flood.push_back(connect_to_root());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Hello hello;
    REQUIRE(make_hello(secret, 0, 2, 20000, &hello).is_ok());
    const std::string frame = encode_frame(FrameType::Hello, &hello, sizeof hello);
    REQUIRE(write(slow, frame.data(), frame.size()) == static_cast<ssize_t>(frame.size()));
    FrameHeader h{};
    pollfd p{slow, POLLIN, 0};
    const bool answered = poll(&p, 1, 3000) == 1 && read(slow, &h, sizeof h) == static_cast<ssize_t>(sizeof h);
    CHECK(answered);
    CHECK(h.type == static_cast<uint32_t>(FrameType::Welcome));
    int refused = 0;
    for (int fd : flood) {
        char byte;
        refused += recv(fd, &byte, 1, MSG_DONTWAIT) == 0;
        close(fd);
    }
    CHECK(refused >= 200 - 128);
    close(slow);
    stop_service(root, root_alive);
}
