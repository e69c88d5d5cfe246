// Link emulation on real ranks: the ranks of a host share the emulated
// links' state, so transfers of different ranks over one simulated link
// share its bandwidth. On a line of four chips (0-1-2-3), 0->2 and 1->3 both
// cross the link 1->2, so together they take twice as long as one of them
// alone, while 0->1 and 2->3, which share nothing, take as long as one.
// The links are slow enough (0.05 GB/s emulated) that the host's own copies
// are a few percent of the time, sanitizers included: the ratios, not the
// times, are checked.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "local_launch.hpp"
#include "mp_support.hpp"

namespace {

constexpr size_t kBytes = 4 << 20;

// Milliseconds for this rank's part of one phase: `sends` and `recvs` are
// (peer) lists, all started after a barrier, all in one group; the phase's
// time is the slowest rank's.
double timed_phase(nnpccl_comm_t comm, const std::vector<int> &sends, const std::vector<int> &recvs, int *failures) {
    std::vector<char> out(kBytes, 'x'), in(kBytes, 0);
    int32_t one = 1, sum = 0;
    if (nnpccl_allreduce(&one, &sum, 1, NNPCCL_INT32, NNPCCL_SUM, comm) != NNPCCL_SUCCESS) ++*failures;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<nnpccl_request_t> requests;
    for (int peer : sends) {
        requests.push_back(nullptr);
        if (nnpccl_isend(out.data(), kBytes, NNPCCL_UINT8, peer, comm, &requests.back()) != NNPCCL_SUCCESS) ++*failures;
    }
    for (int peer : recvs) {
        requests.push_back(nullptr);
        if (nnpccl_irecv(in.data(), kBytes, NNPCCL_UINT8, peer, comm, &requests.back()) != NNPCCL_SUCCESS) ++*failures;
    }
    for (nnpccl_request_t r : requests)
        if (nnpccl_wait(r) != NNPCCL_SUCCESS) ++*failures;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!recvs.empty() && (in.front() != 'x' || in.back() != 'x')) ++*failures;
    double slowest = 0;
    if (nnpccl_allreduce(&ms, &slowest, 1, NNPCCL_FLOAT64, NNPCCL_MAX, comm) != NNPCCL_SUCCESS) ++*failures;
    return slowest;
}

} // namespace

TEST_CASE("emulated links are shared by the ranks of a host", "[mp][emulation]") {
    char path[] = "/tmp/nnpccl-line-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    std::ofstream(path) << "{\"chips\": 4, \"links\": [{\"from\": 0, \"to\": 1, \"gbps\": 1, \"latency_us\": 1},\n"
                           "{\"from\": 1, \"to\": 2, \"gbps\": 1, \"latency_us\": 1},\n"
                           "{\"from\": 2, \"to\": 3, \"gbps\": 1, \"latency_us\": 1}]}\n";
    setenv("NNPCCL_TOPO", path, 1);
    setenv("NNPCCL_EMULATE_LINKS", "1", 1);
    setenv("NNPCCL_EMULATE_SCALE", "20", 1);
    int status = run_local_ranks(4, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
        nnpccl_comm_t comm = join_job(rank, nranks, id, 60);
        if (comm == nullptr) return 1;
        int failures = 0;
        auto only = [rank](int who, std::vector<int> peers) { return rank == who ? peers : std::vector<int>{}; };
        // Each phase twice, the first as a warm-up of the queues.
        double alone = 0, crossing = 0, apart = 0;
        for (int round = 0; round < 2; ++round) {
            alone = timed_phase(comm, only(0, {2}), only(2, {0}), &failures);
            std::vector<int> sends = rank < 2 ? std::vector<int>{rank + 2} : std::vector<int>{};
            std::vector<int> recvs = rank >= 2 ? std::vector<int>{rank - 2} : std::vector<int>{};
            crossing = timed_phase(comm, sends, recvs, &failures);
            apart = timed_phase(comm, rank % 2 == 0 ? std::vector<int>{rank + 1} : std::vector<int>{},
                                rank % 2 == 1 ? std::vector<int>{rank - 1} : std::vector<int>{}, &failures);
        }
        if (rank == 0) {
            // 4 MiB at 0.05 GB/s: 84 ms a flow on a link of its own, the
            // pacing in the path (unpaced, it takes about 1 ms). A
            // receiver's clock starts when it leaves the barrier, which
            // may be a few ms after its sender's first messages left, so
            // the bound checked is lower.
            std::fprintf(stderr,
                         "emulation: one flow %.1f ms, two over one link %.1f ms (%.2fx), two apart %.1f ms "
                         "(%.2fx)\n",
                         alone, crossing, crossing / alone, apart, apart / alone);
            EXPECT(alone > 60);
            EXPECT(crossing / alone > 1.6 && crossing / alone < 2.5);
            EXPECT(apart / alone < 1.35);
        }
        if (nnpccl_comm_destroy(comm) != NNPCCL_SUCCESS) ++failures;
        return failures;
    });
    unsetenv("NNPCCL_TOPO");
    unsetenv("NNPCCL_EMULATE_LINKS");
    unsetenv("NNPCCL_EMULATE_SCALE");
    unlink(path);
    CHECK(status == 0);
}
