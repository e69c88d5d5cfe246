// The C API as a user meets it, on real ranks: bad input is refused with a
// message naming the argument and leaves the communicator usable;
// nonblocking calls complete in order; bootstrap failures end in an error,
// never a hang; and no shared-memory file outlives the job.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "local_launch.hpp"
#include "mp_support.hpp"
#include "nnpccl_inspect.h"

namespace {

nnpccl_comm_t init(int rank, int nranks, const nnpccl_unique_id_t &id, int timeout_sec = 30) {
    return join_job(rank, nranks, id, timeout_sec);
}

bool mentions(const char *text, const char *word) { return std::strstr(text, word) != nullptr; }

// One allreduce of rank+1 over all ranks must give n(n+1)/2.
bool allreduce_works(nnpccl_comm_t comm, int rank, int nranks) {
    int32_t mine = rank + 1, sum = 0;
    return nnpccl_allreduce(&mine, &sum, 1, NNPCCL_INT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS &&
           sum == nranks * (nranks + 1) / 2;
}

int bad_input(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = init(rank, nranks, id);
    if (comm == nullptr) return 1;
    int failures = 0;
    float buf[4] = {1, 2, 3, 4};
    nnpccl_request_t pending = nullptr;
    // Each refusal is checked at once: the next call replaces the last error.
    auto refused = [&](const char *argument, nnpccl_result_t rc) {
        EXPECT(rc == NNPCCL_ERR_INVALID_ARGUMENT);
        const char *message =
            std::strcmp(argument, "comm") == 0 ? nnpccl_get_last_error(nullptr) : nnpccl_get_last_error(comm);
        if (!mentions(message, argument)) {
            std::fprintf(stderr, "rank %d: the error for a bad %s says '%s'\n", rank, argument, message);
            ++failures;
        }
        // The communicator stays usable after every refusal.
        EXPECT(allreduce_works(comm, rank, nranks));
    };
    refused("comm", nnpccl_allreduce(buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, nullptr));
    refused("sendbuf", nnpccl_allreduce(nullptr, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("recvbuf", nnpccl_allreduce(buf, nullptr, 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("datatype", nnpccl_allreduce(buf, buf, 4, static_cast<nnpccl_datatype_t>(42), NNPCCL_SUM, comm));
    refused("op", nnpccl_allreduce(buf, buf, 4, NNPCCL_FLOAT32, static_cast<nnpccl_redop_t>(-1), comm));
    refused("root", nnpccl_broadcast(buf, buf, 4, NNPCCL_FLOAT32, nranks, comm));
    refused("root", nnpccl_reduce(buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, -1, comm));
    refused("count", nnpccl_allreduce(buf, buf, SIZE_MAX / 2, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("recvcount", nnpccl_reduce_scatter(buf, buf, SIZE_MAX / 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("recvbuf", nnpccl_allgather(buf, nullptr, 1, NNPCCL_FLOAT32, comm));
    refused("request", nnpccl_iallreduce(buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm, nullptr));
    refused("root", nnpccl_gather(buf, buf, 1, NNPCCL_FLOAT32, nranks, comm));
    refused("sendcount", nnpccl_gather(buf, buf, SIZE_MAX / 8, NNPCCL_FLOAT32, 0, comm));
    refused("sendbuf", nnpccl_gather(nullptr, buf, 1, NNPCCL_FLOAT32, 0, comm));
    refused("root", nnpccl_scatter(buf, buf, 1, NNPCCL_FLOAT32, -1, comm));
    refused("recvbuf", nnpccl_scatter(buf, nullptr, 1, NNPCCL_FLOAT32, 0, comm));
    // Within the type's limit per rank, beyond it times nranks.
    refused("count", nnpccl_alltoall(buf, buf, SIZE_MAX / 4 / static_cast<size_t>(nranks) / 2 + 1, NNPCCL_FLOAT32,
                                     comm));
    refused("recvbuf", nnpccl_ialltoall(buf, nullptr, 1, NNPCCL_FLOAT32, comm, &pending));
    refused("peer", nnpccl_send(buf, 1, NNPCCL_FLOAT32, rank, comm));
    refused("peer", nnpccl_recv(buf, 1, NNPCCL_FLOAT32, nranks, comm));
    refused("recvbuf", nnpccl_recv(nullptr, 1, NNPCCL_FLOAT32, (rank + 1) % nranks, comm));
    refused("sendbuf", nnpccl_isend(nullptr, 1, NNPCCL_FLOAT32, (rank + 1) % nranks, comm, &pending));
    EXPECT(pending == nullptr);
    // Count 0 with NULL buffers is fine.
    EXPECT(nnpccl_allreduce(nullptr, nullptr, 0, NNPCCL_FLOAT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
    // Broadcast's sendbuf is only read on the root.
    EXPECT(nnpccl_broadcast(rank == 0 ? buf : nullptr, buf, 4, NNPCCL_FLOAT32, 0, comm) == NNPCCL_SUCCESS);
    // Reduce's recvbuf is only written on the root.
    EXPECT(nnpccl_reduce(buf, rank == 0 ? buf : nullptr, 4, NNPCCL_FLOAT32, NNPCCL_SUM, 0, comm) == NNPCCL_SUCCESS);
    // So is gather's; scatter's sendbuf is only read there.
    std::vector<float> all(static_cast<size_t>(nranks) * 4, 0.0f);
    EXPECT(nnpccl_gather(buf, rank == 0 ? all.data() : nullptr, 4, NNPCCL_FLOAT32, 0, comm) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_scatter(rank == 0 ? all.data() : nullptr, buf, 4, NNPCCL_FLOAT32, 0, comm) == NNPCCL_SUCCESS);
    // Count 0 sends and receives pair up with NULL buffers too.
    nnpccl_request_t s0 = nullptr, r0 = nullptr;
    EXPECT(nnpccl_isend(nullptr, 0, NNPCCL_FLOAT32, (rank + 1) % nranks, comm, &s0) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_irecv(nullptr, 0, NNPCCL_FLOAT32, (rank + nranks - 1) % nranks, comm, &r0) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_wait(s0) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_wait(r0) == NNPCCL_SUCCESS);
    int r = -1, n = -1;
    EXPECT(nnpccl_comm_rank(comm, &r) == NNPCCL_SUCCESS && r == rank);
    EXPECT(nnpccl_comm_size(comm, &n) == NNPCCL_SUCCESS && n == nranks);
    EXPECT(nnpccl_comm_rank(comm, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    nnpccl_result_t async = NNPCCL_ERR_INTERNAL;
    EXPECT(nnpccl_comm_get_async_error(comm, &async) == NNPCCL_SUCCESS && async == NNPCCL_SUCCESS);
    EXPECT(allreduce_works(comm, rank, nranks));
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

int nonblocking(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = init(rank, nranks, id);
    if (comm == nullptr) return 1;
    int failures = 0;
    const int kOps = 8;
    const size_t n = 100003;
    std::vector<std::vector<int64_t>> in(kOps, std::vector<int64_t>(n)), out(kOps, std::vector<int64_t>(n, -1));
    std::vector<nnpccl_request_t> reqs(kOps, nullptr);
    for (int k = 0; k < kOps; ++k) {
        for (size_t i = 0; i < n; ++i) in[k][i] = static_cast<int64_t>(i) * (k + 1) + rank;
        EXPECT(nnpccl_iallreduce(in[k].data(), out[k].data(), n, NNPCCL_INT64, NNPCCL_SUM, comm, &reqs[k]) ==
               NNPCCL_SUCCESS);
    }
    nnpccl_request_t barrier = nullptr;
    EXPECT(nnpccl_ibarrier(comm, &barrier) == NNPCCL_SUCCESS);
    // Half are waited for, half polled with nnpccl_test (the runtime progresses them by itself).
    for (int k = 0; k < kOps; ++k) {
        if (k % 2 == 0) {
            EXPECT(nnpccl_wait(reqs[k]) == NNPCCL_SUCCESS);
        } else {
            int done = 0;
            auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            while (!done && std::chrono::steady_clock::now() < deadline) {
                EXPECT(nnpccl_test(reqs[k], &done) == NNPCCL_SUCCESS);
                if (!done) usleep(100);
            }
            EXPECT(done == 1);
        }
        const int64_t ranks_sum = static_cast<int64_t>(nranks) * (nranks - 1) / 2;
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i)
            wrong += out[k][i] != static_cast<int64_t>(i) * (k + 1) * nranks + ranks_sum;
        EXPECT(wrong == 0);
    }
    EXPECT(nnpccl_wait(barrier) == NNPCCL_SUCCESS);
    // A freed request's operation still completes; destroy waits for it.
    nnpccl_request_t orphan = nullptr;
    EXPECT(nnpccl_iallreduce(in[0].data(), out[0].data(), n, NNPCCL_INT64, NNPCCL_SUM, comm, &orphan) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_request_free(orphan) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

// This process's descriptors and mappings of nnpccl's shared-memory
// segments (anonymous memfds, so they appear only here, never in /dev/shm).
int shm_descriptors() {
    int count = 0;
    if (DIR *d = opendir("/proc/self/fd")) {
        while (dirent *e = readdir(d)) {
            char target[256] = {};
            std::string path = std::string("/proc/self/fd/") + e->d_name;
            if (readlink(path.c_str(), target, sizeof target - 1) > 0 && std::strstr(target, "memfd:nnpccl-shm"))
                ++count;
        }
        closedir(d);
    }
    return count;
}

int shm_mappings() {
    int count = 0;
    if (FILE *maps = std::fopen("/proc/self/maps", "r")) {
        char line[512];
        while (std::fgets(line, sizeof line, maps) != nullptr)
            count += std::strstr(line, "memfd:nnpccl-shm") != nullptr;
        std::fclose(maps);
    }
    return count;
}

bool libfabric_mapped() {
    bool mapped = false;
    if (FILE *maps = std::fopen("/proc/self/maps", "r")) {
        char line[512];
        while (std::fgets(line, sizeof line, maps) != nullptr)
            mapped = mapped || std::strstr(line, "/libfabric.so") != nullptr;
        std::fclose(maps);
    }
    return mapped;
}

} // namespace

// nnpccl_inspect.h on a live communicator: forcing algorithms changes what
// the next call runs on every rank, NULL goes back to the communicator's
// own, and a bad rule or call is refused by name with nothing changed.
int inspect_and_force(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = init(rank, nranks, id);
    if (comm == nullptr) return 1;
    int failures = 0;
    std::vector<int32_t> in(4096, rank + 1), out(4096, 0);
    nnpccl_call_t call{};
    call.collective = NNPCCL_COLL_ALLREDUCE;
    call.sendbuf = in.data();
    call.recvbuf = out.data();
    call.count = in.size();
    call.datatype = NNPCCL_INT32;
    call.op = NNPCCL_SUM;
    char name[32] = "";
    auto runs = [&](const char *expected) {
        size_t left = 99;
        EXPECT(nnpccl_comm_get_algorithm(comm, &call, name, sizeof name, &left) == NNPCCL_SUCCESS);
        EXPECT(std::strcmp(name, expected) == 0);
        EXPECT(left == 0); // forced: nothing to measure
        EXPECT(nnpccl_allreduce(in.data(), out.data(), in.size(), NNPCCL_INT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
        EXPECT(out[0] == nranks * (nranks + 1) / 2 && out.back() == out[0]);
    };
    for (const char *algorithm : {"ring", "direct", "halving_doubling", "double_binary_tree"}) {
        EXPECT(nnpccl_comm_set_algorithms(comm, (std::string("allreduce:") + algorithm).c_str()) == NNPCCL_SUCCESS);
        runs(algorithm);
    }
    EXPECT(nnpccl_comm_set_algorithms(comm, "allreduce:rnig") == NNPCCL_ERR_INVALID_ARGUMENT);
    EXPECT(mentions(nnpccl_get_last_error(comm), "rnig"));
    runs("double_binary_tree"); // unchanged by the refusal
    EXPECT(nnpccl_comm_set_algorithms(comm, nullptr) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_comm_get_algorithm(comm, &call, name, sizeof name, nullptr) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_comm_get_algorithm(comm, &call, name, 2, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT ||
           std::strlen(name) < 2);
    call.collective = static_cast<nnpccl_collective_t>(77);
    EXPECT(nnpccl_comm_get_algorithm(comm, &call, name, sizeof name, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    EXPECT(mentions(nnpccl_get_last_error(comm), "collective"));
    EXPECT(allreduce_works(comm, rank, nranks));
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

TEST_CASE("nnpccl_inspect.h: the selector's choice, forced and explained", "[mp][api][inspect]") {
    CHECK(run_local_ranks(3, inspect_and_force) == 0);

    nnpccl_call_t call{};
    call.collective = NNPCCL_COLL_ALLREDUCE;
    call.count = size_t{1} << 28;
    call.datatype = NNPCCL_FLOAT32;
    call.op = NNPCCL_SUM;
    std::vector<nnpccl_prediction_t> predictions(static_cast<size_t>(nnpccl_algorithm_count()));
    int count = 0;
    nnpccl_explanation_t e;
    REQUIRE(nnpccl_explain("nnpt-pod32", 32, &call, predictions.data(), static_cast<int>(predictions.size()), &count,
                           &e) == NNPCCL_SUCCESS);
    CHECK(std::string(e.topology) == "nnpt-pod32");
    CHECK(e.nranks == 32);
    CHECK(std::string(e.chosen) == "ring"); // at 1 GiB on the POD, its two channels per port at the bound
    int chosen = 0;
    for (int i = 0; i < count; ++i) {
        const nnpccl_prediction_t &p = predictions[static_cast<size_t>(i)];
        chosen += p.chosen;
        if (p.applies) CHECK(p.time_us >= e.lower_bound_us); // nothing beats the bound
    }
    CHECK(chosen == 1);
    // A rule asked about as an argument, the environment untouched.
    REQUIRE(nnpccl_explain_with_rules("nnpt-pod32", 32, &call, "allreduce:ring", predictions.data(),
                                      static_cast<int>(predictions.size()), &count, &e) == NNPCCL_SUCCESS);
    CHECK(std::string(e.chosen) == "ring");
    CHECK(e.forced == 1);
    CHECK(e.algorithms_forced == 1);
    CHECK(nnpccl_explain_with_rules("nnpt-pod32", 32, &call, "allreduce:no_such_algorithm", predictions.data(),
                                    static_cast<int>(predictions.size()), &count, &e) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(mentions(nnpccl_get_last_error(nullptr), "no_such_algorithm"));
    CHECK(nnpccl_explain("no-such-machine", 4, &call, predictions.data(), count, &count, &e) ==
          NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(mentions(nnpccl_get_last_error(nullptr), "no-such-machine"));
    nnpccl_collective_t c;
    CHECK(nnpccl_collective_from_name("reduce_scatter", &c) == NNPCCL_SUCCESS);
    CHECK(c == NNPCCL_COLL_REDUCE_SCATTER);
    CHECK(nnpccl_collective_from_name("bcast", &c) == NNPCCL_ERR_INVALID_ARGUMENT);
    nnpccl_datatype_t dt;
    CHECK(nnpccl_datatype_from_name("bf16", &dt) == NNPCCL_SUCCESS);
    CHECK(dt == NNPCCL_BFLOAT16);
    CHECK(nnpccl_datatype_size(dt) == 2);
    CHECK(nnpccl_datatype_name(static_cast<nnpccl_datatype_t>(99)) == nullptr);
}

// Blocking calls of one shape reuse their plan; forcing another algorithm
// between them must still change what the next one runs. The timeline
// (NNPCCL_TRACE) names each operation's algorithm.
int force_between_blocking_calls(int rank, int nranks, const nnpccl_unique_id_t &id, const char *trace) {
    setenv("NNPCCL_TRACE", trace, 1);
    nnpccl_comm_t comm = init(rank, nranks, id);
    if (comm == nullptr) return 1;
    int failures = 0;
    std::vector<int32_t> in(1024, rank + 1), out(1024, 0);
    for (const char *algorithm : {"ring", "direct", "ring", "halving_doubling"}) {
        EXPECT(nnpccl_comm_set_algorithms(comm, (std::string("allreduce:") + algorithm).c_str()) == NNPCCL_SUCCESS);
        for (int k = 0; k < 3; ++k) {
            EXPECT(nnpccl_allreduce(in.data(), out.data(), in.size(), NNPCCL_INT32, NNPCCL_SUM, comm) ==
                   NNPCCL_SUCCESS);
            EXPECT(out[0] == nranks * (nranks + 1) / 2 && out.back() == out[0]);
        }
    }
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

TEST_CASE("forcing an algorithm between blocking calls of one shape changes what the next one runs", "[mp][api]") {
    char trace[] = "/tmp/nnpccl-force-trace-XXXXXX";
    const int fd = mkstemp(trace);
    REQUIRE(fd >= 0);
    close(fd);
    CHECK(run_local_ranks(3, [&](int rank, int nranks, const nnpccl_unique_id_t &id) {
              return force_between_blocking_calls(rank, nranks, id, trace);
          }) == 0);
    // One event a line: count the ranks' allreduces #first..#first+2 run by `algorithm`.
    std::vector<std::string> lines;
    if (FILE *f = std::fopen(trace, "r")) {
        char line[4096];
        while (std::fgets(line, sizeof line, f) != nullptr) lines.emplace_back(line);
        std::fclose(f);
    }
    std::remove(trace);
    auto ran = [&](int first, const char *algorithm) {
        int found = 0;
        for (const std::string &line : lines)
            for (int k = first; k < first + 3; ++k)
                if (line.find("\"allreduce #" + std::to_string(k) + " (count 1024, int32, sum)\"") !=
                        std::string::npos &&
                    line.find("\"algorithm\":\"" + std::string(algorithm) + "\"") != std::string::npos)
                    ++found;
        return found;
    };
    CHECK(ran(0, "ring") == 9);
    CHECK(ran(3, "direct") == 9);
    CHECK(ran(6, "ring") == 9);
    CHECK(ran(9, "halving_doubling") == 9);
}

TEST_CASE("bad arguments are refused by name and the communicator stays usable", "[mp][api]") {
    CHECK(run_local_ranks(2, bad_input) == 0);
    CHECK(run_local_ranks(3, bad_input) == 0);
}

TEST_CASE("nonblocking operations complete in order, by wait or by test", "[mp][api]") {
    CHECK(run_local_ranks(3, nonblocking) == 0);
}

TEST_CASE("init arguments are checked before anything is contacted", "[api]") {
    nnpccl_comm_t comm = nullptr;
    nnpccl_unique_id_t id;
    std::memset(&id, 0, sizeof id);
    CHECK(nnpccl_comm_init_rank(&comm, 2, id, 0, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK_THAT(nnpccl_get_last_error(nullptr), Catch::Contains("unique id"));
    REQUIRE(nnpccl_get_unique_id(&id) == NNPCCL_SUCCESS);
    CHECK(nnpccl_comm_init_rank(&comm, 2, id, 2, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK_THAT(nnpccl_get_last_error(nullptr), Catch::Contains("rank=2"));
    CHECK(nnpccl_comm_init_rank(&comm, 0, id, 0, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_comm_init_rank(nullptr, 1, id, 0, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    int version = 0;
    CHECK(nnpccl_get_version(&version) == NNPCCL_SUCCESS);
    CHECK(version == NNPCCL_VERSION_CODE);
    CHECK(std::string(nnpccl_get_error_string(NNPCCL_ERR_TIMEOUT)) == "timeout");
}

nnpccl_comm_t single_rank_comm() {
    nnpccl_unique_id_t id;
    nnpccl_comm_t comm = nullptr;
    if (nnpccl_get_unique_id(&id) != NNPCCL_SUCCESS || nnpccl_comm_init_rank(&comm, 1, id, 0, nullptr) != NNPCCL_SUCCESS)
        return nullptr;
    return comm;
}

TEST_CASE("a destroyed, aborted or garbage handle is refused, also by a thread calling while it goes", "[api]") {
    nnpccl_comm_t first = single_rank_comm();
    REQUIRE(first != nullptr);
    int rank = -1;
    CHECK(nnpccl_comm_rank(first, &rank) == NNPCCL_SUCCESS);
    REQUIRE(nnpccl_comm_destroy(first) == NNPCCL_SUCCESS);
    CHECK(nnpccl_comm_rank(first, &rank) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK_THAT(nnpccl_get_last_error(nullptr), Catch::Contains("not a live communicator"));
    alignas(64) unsigned char garbage[4096] = {};
    CHECK(nnpccl_comm_rank(reinterpret_cast<nnpccl_comm_t>(garbage), &rank) == NNPCCL_ERR_INVALID_ARGUMENT);

    // The next communicator may well reuse the first one's address: it is
    // live, and the same handle works again.
    nnpccl_comm_t second = single_rank_comm();
    REQUIRE(second != nullptr);
    float in = 2.5f, out = 0.0f;
    CHECK(nnpccl_allreduce(&in, &out, 1, NNPCCL_FLOAT32, NNPCCL_SUM, second) == NNPCCL_SUCCESS);
    CHECK(out == 2.5f);

    // A thread calls collectives on it until it is aborted under it: every
    // call either completes or is refused, and none touches freed memory
    // (the sanitizer run watches that).
    std::atomic<long> completed{0};
    std::atomic<nnpccl_result_t> last{NNPCCL_SUCCESS};
    std::thread caller([&] {
        float mine = 1.0f, sum = 0.0f;
        nnpccl_result_t rc = NNPCCL_SUCCESS;
        while ((rc = nnpccl_allreduce(&mine, &sum, 1, NNPCCL_FLOAT32, NNPCCL_SUM, second)) == NNPCCL_SUCCESS)
            completed.fetch_add(1, std::memory_order_relaxed);
        last = rc;
    });
    while (completed.load() < 1000) std::this_thread::yield();
    CHECK(nnpccl_comm_abort(second) == NNPCCL_SUCCESS);
    caller.join();
    CHECK((last == NNPCCL_ERR_INVALID_ARGUMENT || last == NNPCCL_ERR_INVALID_USAGE || last == NNPCCL_ERR_REMOTE));
    CHECK(nnpccl_allreduce(&in, &out, 1, NNPCCL_FLOAT32, NNPCCL_SUM, second) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK_THAT(nnpccl_get_last_error(nullptr), Catch::Contains("not a live communicator"));
}

TEST_CASE("a rank that never joins ends init with a timeout naming it, not a hang", "[mp][bootstrap]") {
    // The root, started here with the default NNPCCL_TIMEOUT, learns the
    // rank's own deadline (config.timeout_sec) from its hello.
    nnpccl_unique_id_t id;
    REQUIRE(nnpccl_get_unique_id(&id) == NNPCCL_SUCCESS);
    nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
    cfg.timeout_sec = 2;
    nnpccl_comm_t comm = nullptr;
    auto t0 = std::chrono::steady_clock::now();
    nnpccl_result_t rc = nnpccl_comm_init_rank(&comm, 2, id, 0, &cfg); // rank 1 never comes
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(rc == NNPCCL_ERR_TIMEOUT);
    CHECK(seconds < 10);
    CHECK_THAT(nnpccl_get_last_error(nullptr), Catch::Contains("rank(s) 1 never joined"));
}

namespace {

// Rank 2 of 3 believes the job has 4 ranks (or, `twice`, that it is rank
// 1): every rank fails at once, naming the disagreement, long before the
// deadline the job could never meet.
int join_misconfigured(int rank, int nranks, const nnpccl_unique_id_t &id, bool twice) {
    nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
    cfg.timeout_sec = 30;
    const bool odd = rank == 2;
    nnpccl_comm_t comm = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    const nnpccl_result_t rc = nnpccl_comm_init_rank(&comm, odd && !twice ? nranks + 1 : nranks, id,
                                                     odd && twice ? 1 : rank, &cfg);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string why = nnpccl_get_last_error(nullptr);
    int failures = 0;
    EXPECT(rc == NNPCCL_ERR_INVALID_USAGE);
    EXPECT(seconds < 10);
    EXPECT(why.find(twice ? "joined twice" : "says the job has") != std::string::npos); // whichever joined first
    if (failures != 0) std::fprintf(stderr, "rank %d: %s after %.1f s: %s\n", rank, nnpccl_get_error_string(rc), seconds, why.c_str());
    if (rc == NNPCCL_SUCCESS) nnpccl_comm_destroy(comm);
    return failures;
}

} // namespace

TEST_CASE("a rank that disagrees on the job's size, or joins twice, ends every rank's init at once", "[mp][bootstrap]") {
    for (bool twice : {false, true}) {
        INFO((twice ? "a rank joins twice" : "a rank says the job has 4 ranks"));
        CHECK(run_local_ranks(3, [twice](int rank, int nranks, const nnpccl_unique_id_t &id) {
                  return join_misconfigured(rank, nranks, id, twice);
              }) == 0);
    }
}

TEST_CASE("an unreachable root ends init with a timeout naming it", "[mp][bootstrap]") {
    // A root that listens nowhere: a port on loopback that nothing holds.
    setenv("NNPCCL_ROOT", "127.0.0.1:9", 1);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
    cfg.timeout_sec = 1;
    nnpccl_comm_t comm = nullptr;
    nnpccl_result_t rc = nnpccl_comm_init_from_env(&comm, &cfg);
    unsetenv("NNPCCL_ROOT");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    CHECK(rc == NNPCCL_ERR_TIMEOUT);
    CHECK_THAT(nnpccl_get_last_error(nullptr), Catch::Contains("127.0.0.1:9"));
}

namespace {

// A flag one rank raises (creates) and another waits for, outside nnpccl:
// a fresh path, nothing there yet.
std::string fresh_flag_path() {
    char flag[] = "/tmp/nnpccl-test-flag-XXXXXX";
    const int fd = mkstemp(flag);
    if (fd < 0) return {};
    close(fd);
    unlink(flag);
    return flag;
}

void raise_flag(const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "w");
    if (f != nullptr) std::fclose(f);
}

// Whether the flag went up before `seconds` passed.
bool wait_for_flag(const std::string &path, int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (access(path.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < deadline) usleep(1000);
    return access(path.c_str(), F_OK) == 0;
}

} // namespace

TEST_CASE("a rank that stops calling nnpccl after its sends still lets them arrive", "[mp][ofi][socket]") {
    // Over libfabric, a large send may need the sender's progress calls long
    // after its operation has ended on the sender (tcp's rendezvous). Root 0
    // broadcasts, then waits outside nnpccl for rank 1 to say it has the data.
    const std::string flag_path = fresh_flag_path();
    REQUIRE(!flag_path.empty());
    const char *transport = GENERATE("ofi", "socket");
    CAPTURE(transport);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    int status = run_local_ranks(2, [&flag_path](int rank, int nranks, const nnpccl_unique_id_t &id) {
        nnpccl_comm_t comm = init(rank, nranks, id, 30);
        if (comm == nullptr) return 1;
        std::vector<float> data(4 << 20, rank == 0 ? 1.5f : 0.0f);
        if (nnpccl_broadcast(data.data(), data.data(), data.size(), NNPCCL_FLOAT32, 0, comm) != NNPCCL_SUCCESS) return 1;
        int failures = 0;
        if (rank == 1) {
            for (float v : data) failures += v != 1.5f;
            raise_flag(flag_path);
        } else {
            if (!wait_for_flag(flag_path, 20)) {
                std::fprintf(stderr, "rank 0: rank 1 never got the broadcast while rank 0 was away\n");
                ++failures;
            }
        }
        if (nnpccl_comm_destroy(comm) != NNPCCL_SUCCESS) ++failures;
        return failures;
    });
    unsetenv("NNPCCL_TRANSPORT");
    unlink(flag_path.c_str());
    CHECK(status == 0);
}

TEST_CASE("over sockets, a receiver seconds late to a large broadcast still gets it", "[mp][socket]") {
    // The root's connection to rank 1 sits at a zero window for 6 s while
    // rank 1 is away: longer than the 5 s the bootstrap's connections allow
    // unacknowledged data, which data connections must not inherit.
    setenv("NNPCCL_TRANSPORT", "socket", 1);
    int status = run_local_ranks(2, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
        nnpccl_comm_t comm = init(rank, nranks, id, 30);
        if (comm == nullptr) return 1;
        int failures = 0;
        std::vector<float> data(16 << 20 >> 2, rank == 0 ? 4.5f : 0.0f);
        if (rank == 1) sleep(6);
        EXPECT(nnpccl_broadcast(data.data(), data.data(), data.size(), NNPCCL_FLOAT32, 0, comm) == NNPCCL_SUCCESS);
        EXPECT(data.front() == 4.5f && data[data.size() / 2] == 4.5f && data.back() == 4.5f);
        if (failures != 0) std::fprintf(stderr, "rank %d: %s\n", rank, nnpccl_get_last_error(comm));
        EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
        return failures;
    });
    unsetenv("NNPCCL_TRANSPORT");
    CHECK(status == 0);
}

TEST_CASE("over sockets, buffers at any alignment and of any length give exact results", "[mp][socket]") {
    // The socket transport pads every frame to 64 bytes and sends from, or
    // receives into, caller memory only where it is 16-byte aligned,
    // otherwise through its slots. Each rank's buffers sit at a different
    // offset from 16-byte alignment, the counts are odd, and the largest
    // span several chunks and go in place where aligned.
    setenv("NNPCCL_TRANSPORT", "socket", 1);
    setenv("NNPCCL_CHUNK_SIZE", "64K", 1);
    int status = run_local_ranks(3, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
        nnpccl_comm_t comm = init(rank, nranks, id, 30);
        if (comm == nullptr) return 1;
        int failures = 0;
        const size_t offset = static_cast<size_t>(rank) * 4 + 4; // 4, 8, 12 bytes past alignment
        for (size_t count : {size_t{1}, size_t{15}, size_t{1031}, size_t{100003}, size_t{300007}}) {
            std::vector<int32_t> in_storage(count + 8), out_storage(count + 8);
            std::vector<uint8_t> gathered_storage(count * static_cast<size_t>(nranks) + 64);
            auto *in = reinterpret_cast<int32_t *>(reinterpret_cast<char *>(in_storage.data()) + offset);
            auto *out = reinterpret_cast<int32_t *>(reinterpret_cast<char *>(out_storage.data()) + offset);
            uint8_t *gathered = gathered_storage.data() + offset + 1;
            for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i * 7 + static_cast<size_t>(rank));
            EXPECT(nnpccl_allreduce(in, out, count, NNPCCL_INT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
            size_t wrong = 0;
            for (size_t i = 0; i < count; ++i)
                wrong += out[i] != static_cast<int32_t>(3 * i * 7 + 3); // ranks 0, 1 and 2 add 0 + 1 + 2
            EXPECT(nnpccl_allgather(reinterpret_cast<const uint8_t *>(in) + 1, gathered, count, NNPCCL_UINT8, comm) ==
                   NNPCCL_SUCCESS);
            for (int r = 0; r < nranks; ++r) {
                std::vector<int32_t> theirs(count + 1);
                for (size_t i = 0; i < count; ++i) theirs[i] = static_cast<int32_t>(i * 7 + static_cast<size_t>(r));
                const auto *bytes = reinterpret_cast<const uint8_t *>(theirs.data()) + 1;
                wrong += std::memcmp(gathered + static_cast<size_t>(r) * count, bytes, count) != 0;
            }
            if (wrong != 0) std::fprintf(stderr, "rank %d: %zu wrong at count %zu\n", rank, wrong, count);
            failures += wrong != 0;
        }
        EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
        return failures;
    });
    unsetenv("NNPCCL_CHUNK_SIZE");
    unsetenv("NNPCCL_TRANSPORT");
    CHECK(status == 0);
}

namespace {

long resident_kib() {
    long pages = 0, resident = 0;
    FILE *f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr) return 0;
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

} // namespace

TEST_CASE("over ofi or sockets, a root broadcasting small messages to a rank that stopped calling times out, its memory bounded",
          "[mp][ofi][socket]") {
    // Messages small enough for the provider's inject complete at once: with
    // nothing else bounding them the root would go on succeeding, queueing
    // them without end. Rank 1 takes part in the first calls (the
    // connection is up), then stays away until rank 0 is done.
    const std::string flag_path = fresh_flag_path();
    REQUIRE(!flag_path.empty());
    const char *transport = GENERATE("ofi", "socket");
    CAPTURE(transport);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    int status = run_local_ranks(2, [&flag_path](int rank, int nranks, const nnpccl_unique_id_t &id) {
        nnpccl_comm_t comm = init(rank, nranks, id, 2);
        if (comm == nullptr) return 1;
        int failures = 0;
        float data[4] = {1, 2, 3, 4};
        for (int i = 0; i < 100; ++i) EXPECT(nnpccl_broadcast(data, data, 4, NNPCCL_FLOAT32, 0, comm) == NNPCCL_SUCCESS);
        if (rank == 1) {
            wait_for_flag(flag_path, 30);
            nnpccl_comm_abort(comm);
            return failures;
        }
        const long resident_before = resident_kib();
        const auto start = std::chrono::steady_clock::now();
        nnpccl_result_t rc = NNPCCL_SUCCESS;
        while (rc == NNPCCL_SUCCESS && std::chrono::steady_clock::now() - start < std::chrono::seconds(15))
            rc = nnpccl_broadcast(data, data, 4, NNPCCL_FLOAT32, 0, comm);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const long grown_kib = resident_kib() - resident_before;
        EXPECT(rc == NNPCCL_ERR_TIMEOUT);
        EXPECT(seconds < 10);
        EXPECT(grown_kib < 64 * 1024);
        if (failures != 0)
            std::fprintf(stderr, "rank 0: %s after %.1f s, %ld KiB more resident: %s\n", nnpccl_get_error_string(rc),
                         seconds, grown_kib, nnpccl_get_last_error(comm));
        raise_flag(flag_path);
        nnpccl_comm_abort(comm);
        return failures;
    });
    unsetenv("NNPCCL_TRANSPORT");
    unlink(flag_path.c_str());
    CHECK(status == 0);
}

TEST_CASE("over ofi, ranks that differ in NNPCCL_OFI_SEND_IN_PLACE still agree on every large message", "[mp][ofi]") {
    // Rank 0 sends from and receives into the caller's buffers (its large
    // messages go split), rank 1 copies everything through its slots: each
    // side must read the other's messages whole, in both directions.
    setenv("NNPCCL_TRANSPORT", "ofi", 1);
    int status = run_local_ranks(2, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
        if (rank == 1) setenv("NNPCCL_OFI_SEND_IN_PLACE", "0", 1);
        nnpccl_comm_t comm = init(rank, nranks, id, 30);
        if (comm == nullptr) return 1;
        int failures = 0;
        const size_t block = size_t{3} << 18; // 3 MiB of floats: six 512 KiB messages, every one split
        std::vector<float> mine(block, static_cast<float>(rank + 1)), all(2 * block, 0.0f);
        EXPECT(nnpccl_allgather(mine.data(), all.data(), block, NNPCCL_FLOAT32, comm) == NNPCCL_SUCCESS);
        EXPECT(all.front() == 1.0f && all[block - 1] == 1.0f && all[block] == 2.0f && all.back() == 2.0f);
        for (int root = 0; root < 2; ++root) {
            std::vector<float> data(block, rank == root ? 7.0f + static_cast<float>(root) : 0.0f);
            EXPECT(nnpccl_broadcast(data.data(), data.data(), block, NNPCCL_FLOAT32, root, comm) == NNPCCL_SUCCESS);
            size_t wrong = 0;
            for (float v : data) wrong += v != 7.0f + static_cast<float>(root);
            EXPECT(wrong == 0);
        }
        EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
        return failures;
    });
    unsetenv("NNPCCL_TRANSPORT");
    CHECK(status == 0);
}

TEST_CASE("destroy while sends over ofi or sockets are still leaving, finished by the progress thread", "[mp][ofi][socket][teardown]") {
    // Sends copied into the transport's slots end the call once posted; the
    // last of them stay in flight while the receiver is away, and the
    // progress thread finishes them while the caller goes on to destroy,
    // which flushes the same transport: the two must take turns
    // (ThreadSanitizer runs this). Rank 1 receives late; rank 0 destroys
    // with its sends still leaving, then every rank checks its data.
    const char *transport = GENERATE("ofi", "socket");
    CAPTURE(transport);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    setenv("NNPCCL_OFI_SEND_IN_PLACE", "0", 1);
    int status = run_local_ranks(2, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
        nnpccl_comm_t comm = init(rank, nranks, id, 30);
        if (comm == nullptr) return 1;
        int failures = 0;
        std::vector<float> data(16 << 20 >> 2, rank == 0 ? 2.5f : 0.0f);
        if (rank == 0) {
            EXPECT(nnpccl_send(data.data(), data.size(), NNPCCL_FLOAT32, 1, comm) == NNPCCL_SUCCESS);
            usleep(20000); // the progress thread at work
        } else {
            usleep(300000);
            EXPECT(nnpccl_recv(data.data(), data.size(), NNPCCL_FLOAT32, 0, comm) == NNPCCL_SUCCESS);
            EXPECT(data.front() == 2.5f && data[data.size() / 2] == 2.5f && data.back() == 2.5f);
        }
        EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
        return failures;
    });
    unsetenv("NNPCCL_OFI_SEND_IN_PLACE");
    unsetenv("NNPCCL_TRANSPORT");
    CHECK(status == 0);
}

namespace {

int open_descriptors() {
    int n = 0;
    if (DIR *d = opendir("/proc/self/fd")) {
        while (dirent *e = readdir(d)) n += e->d_name[0] != '.';
        closedir(d);
    }
    return n;
}

} // namespace

TEST_CASE("a connection to a rank's ofi or socket endpoint that never says who it is does not outlive the communicator",
          "[mp][ofi][socket]") {
    // What a peer stopped between its connect and its connection request
    // leaves behind (libfabric 1.17's net provider keeps such an accepted
    // socket for good). Rank 1, which hosts no rendezvous root, connects
    // to its own listening sockets, which are then only the endpoint's,
    // and says nothing; after destroy its descriptors are as before init.
    const char *transport = GENERATE("ofi", "socket");
    CAPTURE(transport);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    int status = run_local_ranks(2, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
        const int before = open_descriptors();
        nnpccl_comm_t comm = init(rank, nranks, id, 30);
        if (comm == nullptr) return 1;
        int failures = 0;
        EXPECT(allreduce_works(comm, rank, nranks));
        std::vector<int> strangers;
        if (rank == 1)
            if (DIR *d = opendir("/proc/self/fd")) {
                std::vector<int> fds;
                while (dirent *e = readdir(d))
                    if (e->d_name[0] != '.') fds.push_back(std::atoi(e->d_name));
                closedir(d);
                for (int fd : fds) {
                    int listening = 0;
                    socklen_t len = sizeof listening;
                    sockaddr_storage address{};
                    socklen_t address_len = sizeof address;
                    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening ||
                        getsockname(fd, reinterpret_cast<sockaddr *>(&address), &address_len) != 0)
                        continue;
                    int s = socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                    if (s >= 0 && connect(s, reinterpret_cast<sockaddr *>(&address), address_len) == 0)
                        strangers.push_back(s);
                    else if (s >= 0)
                        close(s);
                }
                EXPECT(!strangers.empty());
            }
        EXPECT(allreduce_works(comm, rank, nranks)); // the provider takes the connection meanwhile
        usleep(50000);
        EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
        for (int s : strangers) close(s);
        const int after = open_descriptors();
        if (after != before) std::fprintf(stderr, "rank %d: %d descriptors before init, %d after destroy\n", rank,
                                          before, after);
        EXPECT(after == before);
        return failures;
    });
    unsetenv("NNPCCL_TRANSPORT");
    CHECK(status == 0);
}

TEST_CASE("shared memory is held only while in use, even when a rank is killed", "[mp][shm]") {
    // After init a rank keeps no segment's descriptor (the mappings keep the
    // memory, so it is freed when the last process that maps it is gone,
    // however that process ends), maps its own and each local peer's
    // segment once, and after abort maps none.
    std::vector<int> statuses;
    setenv("NNPCCL_TRANSPORT", "shm", 1);
    run_local_ranks(
        3,
        [](int rank, int nranks, const nnpccl_unique_id_t &id) {
            nnpccl_comm_t comm = init(rank, nranks, id, 5);
            if (comm == nullptr) return 1;
            int failures = 0;
            EXPECT(shm_descriptors() == 0);
            EXPECT(shm_mappings() == nranks);
            if (rank == 2) raise(SIGKILL);
            float x = 1, y = 0;
            nnpccl_result_t rc = nnpccl_allreduce(&x, &y, 1, NNPCCL_FLOAT32, NNPCCL_SUM, comm);
            EXPECT(rc == NNPCCL_ERR_REMOTE);
            nnpccl_comm_abort(comm);
            EXPECT(shm_mappings() == 0);
            EXPECT(shm_descriptors() == 0);
            return failures;
        },
        false, &statuses);
    unsetenv("NNPCCL_TRANSPORT");
    REQUIRE(statuses.size() == 3);
    CHECK(statuses[0] == 0);
    CHECK(statuses[1] == 0);
    CHECK(statuses[2] == 128 + SIGKILL);
}

TEST_CASE("only a rank that uses ofi loads libfabric", "[mp][ofi][shm]") {
    // libfabric's provider libraries delay the start of every process that
    // maps them, and a job on one host over shared memory needs none of it.
    REQUIRE(!libfabric_mapped()); // the ranks inherit this process's mappings
    const char *transport = GENERATE("auto", "ofi");
    CAPTURE(transport);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    const bool over_ofi = std::strcmp(transport, "ofi") == 0;
    int status = run_local_ranks(2, [over_ofi](int rank, int nranks, const nnpccl_unique_id_t &id) {
        nnpccl_comm_t comm = init(rank, nranks, id, 30);
        if (comm == nullptr) return 1;
        int failures = 0;
        EXPECT(allreduce_works(comm, rank, nranks));
        EXPECT(libfabric_mapped() == over_ofi);
        if (nnpccl_comm_destroy(comm) != NNPCCL_SUCCESS) ++failures;
        return failures;
    });
    unsetenv("NNPCCL_TRANSPORT");
    CHECK(status == 0);
}

TEST_CASE("a local job leaves the caller's own children to the caller", "[mp][launch]") {
    // ccl-bench --np and these tests launch through run_local_ranks; a
    // caller with children of its own must still be able to wait for them.
    const pid_t own = fork();
    REQUIRE(own >= 0);
    if (own == 0) _exit(7); // exits while the job runs
    const int status = run_local_ranks(2, [](int, int, const nnpccl_unique_id_t &) {
        usleep(200000);
        return 0;
    });
    CHECK(status == 0);
    int own_status = 0;
    REQUIRE(waitpid(own, &own_status, 0) == own);
    CHECK(WIFEXITED(own_status));
    CHECK(WEXITSTATUS(own_status) == 7);
}
