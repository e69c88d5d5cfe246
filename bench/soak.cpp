#include "soak.hpp"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "check_data.hpp"

namespace {

long rss_kib() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
    return -1;
}

int open_fds() {
    int n = 0;
    if (DIR *d = opendir("/proc/self/fd")) {
        while (dirent *e = readdir(d)) n += e->d_name[0] != '.';
        closedir(d);
        --n; // the directory stream itself
    }
    return n;
}

int shm_segments() {
    int n = 0;
    if (DIR *d = opendir("/dev/shm")) {
        while (dirent *e = readdir(d)) n += std::strncmp(e->d_name, "nnpccl-", 7) == 0;
        closedir(d);
    }
    return n;
}

uint64_t sum_u64(nnpccl_comm_t comm, uint64_t v) {
    uint64_t out = 0;
    nnpccl_allreduce(&v, &out, 1, NNPCCL_UINT64, NNPCCL_SUM, comm);
    return out;
}

constexpr size_t kGuard = 64;

} // namespace

int run_soak(nnpccl_comm_t comm, int rank, int nranks, double seconds, size_t max_bytes) {
    // Every rank draws the same sequence: rank 0's seed, broadcast.
    uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    if (nnpccl_broadcast(&seed, &seed, 1, NNPCCL_UINT64, 0, comm) != NNPCCL_SUCCESS) return 1;
    std::mt19937_64 rng(seed);
    // Buffers for the largest call, allocated once, with a guard zone behind each.
    std::vector<unsigned char> send(max_bytes * static_cast<size_t>(nranks) + kGuard);
    std::vector<unsigned char> recv(max_bytes * static_cast<size_t>(nranks) + kGuard);
    const long rss_start = rss_kib();
    // Buffers, transport slots, libfabric's buffer pools and the schedule
    // cache fill during the first operations (over the tcp provider, for
    // about a minute); a leak keeps growing with the operation count. So the
    // baseline is taken at half time, and a soak for a verdict runs 2 minutes
    // or more.
    long rss_before = -1;
    int fds_before = -1;
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t ops = 0, bytes = 0, wrong = 0, out_of_bounds = 0;
    // Not send and recv: a rank's random call would have no partner.
    const nnpccl_collective_t colls[] = {NNPCCL_COLL_ALLREDUCE, NNPCCL_COLL_REDUCE_SCATTER, NNPCCL_COLL_ALLGATHER,
                                NNPCCL_COLL_BROADCAST, NNPCCL_COLL_REDUCE,        NNPCCL_COLL_BARRIER,
                                NNPCCL_COLL_GATHER,    NNPCCL_COLL_SCATTER,       NNPCCL_COLL_ALLTOALL};
    bool go_on = true;
    while (go_on) {
        nnpccl_check::CallShape s;
        s.collective = colls[rng() % std::size(colls)];
        s.rank = rank;
        s.nranks = nranks;
        s.dt = static_cast<nnpccl_datatype_t>(rng() % NNPCCL_NUM_DATATYPES);
        s.op = static_cast<nnpccl_redop_t>(rng() % NNPCCL_NUM_OPS);
        s.root = static_cast<int>(rng() % static_cast<uint64_t>(nranks));
        s.in_place = rng() % 2 == 0;
        const size_t es = nnpccl_datatype_size(s.dt);
        // Log-uniform sizes from one element to max_bytes, and some empty calls.
        double exponent = std::uniform_real_distribution<double>(0, std::log2(static_cast<double>(max_bytes / es)))(rng);
        s.count = rng() % 16 == 0 ? 0 : static_cast<size_t>(std::exp2(exponent));
        const void *sp = nullptr;
        void *rp = nullptr;
        nnpccl_check::lay_out(s, send.data(), recv.data(), &sp, &rp);
        const size_t written = nnpccl_check::bytes_written(s);
        std::memset(recv.data() + written, 0xa5, kGuard);
        nnpccl_result_t rc = nnpccl_check::issue(comm, s, sp, rp);
        if (rc != NNPCCL_SUCCESS) {
            std::fprintf(stderr, "soak: rank %d: operation %" PRIu64 " failed: %s\n", rank, ops,
                         nnpccl_get_last_error(comm));
            return 1;
        }
        if (s.collective != NNPCCL_COLL_BARRIER) {
            size_t bad = nnpccl_check::count_wrong(s, rp);
            if (bad != 0)
                std::fprintf(stderr, "soak: rank %d: %s of %zu %s (%s) had %zu wrong values\n", rank,
                             nnpccl_collective_name(s.collective), s.count, nnpccl_datatype_name(s.dt),
                             s.in_place ? "in place" : "out of place", bad);
            wrong += bad;
            for (size_t i = 0; i < kGuard; ++i) out_of_bounds += recv[written + i] != 0xa5;
            bytes += s.total() * es;
        }
        ++ops;
        if (ops % 64 == 0) {
            // Rank 0 keeps the time; everyone stops together.
            double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            int32_t state[2] = {elapsed < seconds, elapsed >= seconds / 2}; // go on; warmed up
            if (nnpccl_broadcast(state, state, 2, NNPCCL_INT32, 0, comm) != NNPCCL_SUCCESS) return 1;
            go_on = state[0] != 0;
            if (state[1] != 0 && rss_before < 0) {
                rss_before = rss_kib();
                fds_before = open_fds();
            }
        }
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rss_before < 0) { // a run too short to warm up: compare with the start
        rss_before = rss_start;
        fds_before = open_fds();
    }
    const long rss_after = rss_kib();
    const int fds_after = open_fds();
    const uint64_t all_wrong = sum_u64(comm, wrong), all_oob = sum_u64(comm, out_of_bounds);
    // Memory may grow a little while caches warm up; a leak grows with the operation count.
    const uint64_t grown = sum_u64(comm, rss_after - rss_before > 8 * 1024 ? 1 : 0);
    const uint64_t fd_leaks = sum_u64(comm, fds_after != fds_before ? 1 : 0);
    if (rank == 0) {
        std::printf("# soak: %d ranks, %.1f s, seed %" PRIu64 "\n", nranks, elapsed, seed);
        std::printf("# operations      : %" PRIu64 " (%.0f per second)\n", ops, static_cast<double>(ops) / elapsed);
        std::printf("# bytes checked   : %" PRIu64 " per rank\n", bytes);
        std::printf("# wrong values    : %" PRIu64 " %s\n", all_wrong, all_wrong == 0 ? "OK" : "FAILED");
        std::printf("# out of bounds   : %" PRIu64 " %s\n", all_oob, all_oob == 0 ? "OK" : "FAILED");
        std::printf("# rank 0 RSS      : %ld KiB at start, %ld KiB after warm-up, %ld KiB at the end%s\n", rss_start,
                    rss_before, rss_after, grown == 0 ? "" : "  (some rank grew by more than 8 MiB after warm-up: FAILED)");
        std::printf("# rank 0 open fds : %d after warm-up, %d at the end%s\n", fds_before, fds_after,
                    fd_leaks == 0 ? "" : "  (some rank's count changed: FAILED)");
        std::printf("# files in /dev/shm named nnpccl-*: %d\n", shm_segments());
        std::fflush(stdout);
    }
    return (all_wrong != 0 || all_oob != 0 || grown != 0 || fd_leaks != 0) ? 1 : 0;
}
