#include "soak.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
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

// A "Key:   123 kB" line's number from a /proc file; -1 when absent.
long proc_kib(const char *path, const char *key) {
    std::ifstream file(path);
    std::string line;
    const size_t n = std::strlen(key);
    while (std::getline(file, line))
        if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':')
            return std::strtol(line.c_str() + n + 1, nullptr, 10);
    return -1;
}

long rss_kib() { return proc_kib("/proc/self/status", "VmRSS"); }

// Resident memory at the end, in KiB. RSS counts every page this process
// has mapped, shared ones included, so the shm queues two ranks share are
// counted by both; Pss splits each shared page among the processes that
// map it. The soak's own buffers are the user's side of the calls.
enum Memory { kHwm, kRss, kPss, kShmRss, kShmPss, kOwnBuffers, kLibraryPeak, kMemoryFigures };

// Rss and Pss of nnpccl's shared-memory mappings (its queues; anonymous
// memfds, named memfd:nnpccl-... in /proc/self/smaps).
void shm_resident_kib(long *rss, long *pss) {
    *rss = *pss = 0;
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool ours = false;
    while (std::getline(smaps, line)) {
        const size_t colon = line.find(':');
        const bool field = colon != std::string::npos && line.find(' ') > colon; // "Rss:  12 kB", not a mapping
        if (!field) ours = line.find("memfd:nnpccl") != std::string::npos;
        else if (ours && line.compare(0, 4, "Rss:") == 0) *rss += std::strtol(line.c_str() + 4, nullptr, 10);
        else if (ours && line.compare(0, 4, "Pss:") == 0) *pss += std::strtol(line.c_str() + 4, nullptr, 10);
    }
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

// Mappings of nnpccl's shared memory (anonymous memfds: they show only in
// /proc/self/maps, never in /dev/shm). Their number is fixed once the
// communicator is up; one more per call would be a leak.
int shm_mappings() {
    int n = 0;
    if (FILE *maps = std::fopen("/proc/self/maps", "r")) {
        char line[512];
        while (std::fgets(line, sizeof line, maps) != nullptr) n += std::strstr(line, "memfd:nnpccl") != nullptr;
        std::fclose(maps);
    }
    return n;
}

constexpr size_t kGuard = 64;
// How much a rank's RSS may grow from half time to the end. A leak grows
// with the operation count; what warms up (buffers, queues, the schedule
// cache) has done so by half time, give or take a few pages.
constexpr long kRssGrowthKiB = 8 * 1024;
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NNPCCL_SOAK_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(NNPCCL_SOAK_ASAN)
// AddressSanitizer holds freed memory in quarantine, so RSS grows without a
// leak; its LeakSanitizer reports leaks at exit instead.
constexpr bool kRssBounded = false;
#else
constexpr bool kRssBounded = true;
#endif

// What each rank found, summed over the ranks by one allreduce whose result
// is itself checked: the soak's verdict must not rest on an unchecked call.
enum Tally { kOnes, kRankSum, kWrong, kOutOfBounds, kRssGrown, kFdsChanged, kShmMappingsChanged, kTallies };

bool sum_tallies(nnpccl_comm_t comm, int rank, int nranks, const uint64_t (&mine)[kTallies],
                 uint64_t (&all)[kTallies]) {
    nnpccl_result_t rc = nnpccl_allreduce(mine, all, kTallies, NNPCCL_UINT64, NNPCCL_SUM, comm);
    if (rc != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "soak: rank %d: the final allreduce of the ranks' counts failed: %s\n", rank,
                     nnpccl_get_last_error(comm));
        return false;
    }
    const uint64_t n = static_cast<uint64_t>(nranks);
    if (all[kOnes] != n || all[kRankSum] != n * (n + 1) / 2) {
        std::fprintf(stderr,
                     "soak: rank %d: the final allreduce of the ranks' counts is wrong: a one from each of %d ranks "
                     "summed to %" PRIu64 ", ranks 1..%d to %" PRIu64 " (expected %" PRIu64 ")\n",
                     rank, nranks, all[kOnes], nranks, all[kRankSum], n * (n + 1) / 2);
        return false;
    }
    return true;
}

} // namespace

int run_soak(nnpccl_comm_t comm, int rank, int nranks, double seconds, size_t max_bytes, uint64_t seed) {
    // Every rank draws the same sequence: rank 0's seed, broadcast.
    if (seed == 0) seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    if (nnpccl_broadcast(&seed, &seed, 1, NNPCCL_UINT64, 0, comm) != NNPCCL_SUCCESS) return 1;
    std::mt19937_64 rng(seed);
    // Buffers for the largest call, allocated once, with a guard zone
    // behind each. -e bounds a call's whole buffer, as in a sweep: the
    // per-rank block of a blockwise collective is up to max_bytes / nranks.
    const size_t whole = std::max(max_bytes, sizeof(double) * static_cast<size_t>(nranks));
    std::vector<unsigned char> send(whole + kGuard);
    std::vector<unsigned char> recv(whole + kGuard);
    const long rss_start = rss_kib();
    const int shm_start = shm_mappings();
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
                                         NNPCCL_COLL_BROADCAST, NNPCCL_COLL_REDUCE,         NNPCCL_COLL_BARRIER,
                                         NNPCCL_COLL_GATHER,    NNPCCL_COLL_SCATTER,        NNPCCL_COLL_ALLTOALL};
    bool go_on = true;
    while (go_on) {
        nnpccl_check::CallShape s;
        s.rank = rank;
        s.nranks = nranks;
        if (ops < 2 * std::size(colls)) {
            // First each collective once at the largest size, out of place
            // and in place: scratch and caches reach their largest before
            // half time, so that growth after it is a leak, and the peak
            // (VmHWM) is that of the largest calls.
            s.collective = colls[ops / 2];
            s.dt = NNPCCL_FLOAT32;
            s.op = NNPCCL_SUM;
            s.root = 0;
            s.in_place = ops % 2 == 1;
        } else {
            s.collective = colls[rng() % std::size(colls)];
            s.dt = static_cast<nnpccl_datatype_t>(rng() % NNPCCL_NUM_DATATYPES);
            s.op = static_cast<nnpccl_redop_t>(rng() % NNPCCL_NUM_OPS);
            s.root = static_cast<int>(rng() % static_cast<uint64_t>(nranks));
            s.in_place = rng() % 2 == 0;
        }
        const size_t es = nnpccl_datatype_size(s.dt);
        const size_t most = std::max<size_t>(1, max_bytes / es / (s.blockwise() ? static_cast<size_t>(nranks) : 1));
        if (ops < 2 * std::size(colls)) {
            s.count = most;
        } else {
            // Log-uniform sizes from one element to max_bytes in all, and some empty calls.
            double exponent = std::uniform_real_distribution<double>(0, std::log2(static_cast<double>(most)))(rng);
            s.count = rng() % 16 == 0 ? 0 : std::min(most, static_cast<size_t>(std::exp2(exponent)));
        }
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
            if (nnpccl_broadcast(state, state, 2, NNPCCL_INT32, 0, comm) != NNPCCL_SUCCESS) {
                std::fprintf(stderr, "soak: rank %d: broadcast of the go-on flag failed: %s\n", rank,
                             nnpccl_get_last_error(comm));
                return 1;
            }
            if ((state[0] != 0 && state[0] != 1) || (state[1] != 0 && state[1] != 1)) {
                std::fprintf(stderr, "soak: rank %d: broadcast of the go-on flag gave %d %d, not flags\n", rank,
                             state[0], state[1]);
                return 1;
            }
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
    const int shm_after = shm_mappings();
    uint64_t mine[kTallies] = {};
    mine[kOnes] = 1;
    mine[kRankSum] = static_cast<uint64_t>(rank) + 1;
    mine[kWrong] = wrong;
    mine[kOutOfBounds] = out_of_bounds;
    mine[kRssGrown] = kRssBounded && rss_after - rss_before > kRssGrowthKiB ? 1 : 0;
    mine[kFdsChanged] = fds_after != fds_before ? 1 : 0;
    mine[kShmMappingsChanged] = shm_after != shm_start ? 1 : 0;
    if (mine[kRssGrown] != 0)
        std::fprintf(stderr, "soak: rank %d: RSS grew from %ld KiB at half time to %ld KiB (bound: %ld KiB)\n", rank,
                     rss_before, rss_after, kRssGrowthKiB);
    if (mine[kFdsChanged] != 0)
        std::fprintf(stderr, "soak: rank %d: %d open file descriptors at half time, %d at the end\n", rank, fds_before,
                     fds_after);
    uint64_t memory[kMemoryFigures] = {};
    {
        long shm_rss = 0, shm_pss = 0;
        shm_resident_kib(&shm_rss, &shm_pss);
        const long hwm = proc_kib("/proc/self/status", "VmHWM");
        const long own = static_cast<long>((send.size() + recv.size()) >> 10);
        const long figures[kMemoryFigures] = {hwm, rss_after, proc_kib("/proc/self/smaps_rollup", "Pss"), shm_rss,
                                              shm_pss, own, hwm - own};
        for (int m = 0; m < kMemoryFigures; ++m) memory[m] = static_cast<uint64_t>(std::max(figures[m], 0L));
    }
    uint64_t most_memory[kMemoryFigures] = {};
    const bool memory_known = nnpccl_allreduce(memory, most_memory, kMemoryFigures, NNPCCL_UINT64, NNPCCL_MAX, comm) ==
                              NNPCCL_SUCCESS;
    if (!memory_known) std::copy(std::begin(memory), std::end(memory), std::begin(most_memory));
    uint64_t all[kTallies] = {};
    const bool summed = sum_tallies(comm, rank, nranks, mine, all);
    bool mine_failed = false;
    for (int t = kWrong; t < kTallies; ++t) mine_failed = mine_failed || mine[t] != 0;
    if (!summed) std::copy(std::begin(mine), std::end(mine), std::begin(all)); // report what this rank knows
    // A rank that found something fails whatever the sum says.
    bool failed = !summed || mine_failed;
    for (int t = kWrong; t < kTallies; ++t) failed = failed || all[t] != 0;
    if (rank == 0) {
        const char *scope = summed ? "" : " (rank 0 alone: the sum over ranks failed)";
        std::printf("# soak: %d ranks, %.1f s, seed %" PRIu64 "\n", nranks, elapsed, seed);
        std::printf("# operations      : %" PRIu64 " (%.0f per second)\n", ops, static_cast<double>(ops) / elapsed);
        std::printf("# bytes checked   : %" PRIu64 " per rank\n", bytes);
        std::printf("# wrong values    : %" PRIu64 " %s%s\n", all[kWrong], all[kWrong] == 0 ? "OK" : "FAILED", scope);
        std::printf("# out of bounds   : %" PRIu64 " %s%s\n", all[kOutOfBounds],
                    all[kOutOfBounds] == 0 ? "OK" : "FAILED", scope);
        std::printf("# rank 0 RSS      : %ld KiB at start, %ld KiB at half time, %ld KiB at the end%s\n", rss_start,
                    rss_before, rss_after, all[kRssGrown] == 0 ? "" : "  (FAILED: a rank grew by more than the bound)");
        if (kRssBounded)
            std::printf("# RSS bound       : %ld KiB of growth per rank from half time to the end\n", kRssGrowthKiB);
        else
            std::printf(
                "# RSS bound       : none under AddressSanitizer (its quarantine grows; it checks leaks at exit)\n");
        // Not part of the verdict: what the footprint is, for the reader
        // (tests/soak_test.sh holds the queues to NNPCCL_SHM_BYTES).
        const char *over = memory_known ? "max over ranks" : "rank 0 alone: the max over ranks failed";
        std::printf("# memory (%s): VmHWM %" PRIu64 " KiB, VmRSS %" PRIu64 " KiB at the end, Pss %" PRIu64 " KiB\n",
                    over, most_memory[kHwm], most_memory[kRss], most_memory[kPss]);
        std::printf("# memory (%s): the soak's own buffers %" PRIu64 " KiB; the rest (nnpccl, the program, libc) %" PRIu64
                    " KiB at the peak\n",
                    over, most_memory[kOwnBuffers], most_memory[kLibraryPeak]);
        std::printf("# memory (%s): shared-memory queues %" PRIu64 " KiB resident, %" PRIu64 " KiB Pss\n", over,
                    most_memory[kShmRss], most_memory[kShmPss]);
        std::printf("# rank 0 open fds : %d at half time, %d at the end%s\n", fds_before, fds_after,
                    all[kFdsChanged] == 0 ? "" : "  (FAILED: a rank's count changed)");
        std::printf("# rank 0 shared-memory mappings: %d at start, %d at the end%s\n", shm_start, shm_after,
                    all[kShmMappingsChanged] == 0 ? "" : "  (FAILED: a rank's count changed)");
        std::printf("# soak %s\n", failed ? "FAILED" : "OK");
        std::fflush(stdout);
    }
    if (mine_failed)
        std::fprintf(stderr,
                     "soak: rank %d FAILED: %" PRIu64 " wrong values, %" PRIu64 " written out of bounds%s%s%s\n", rank,
                     wrong, out_of_bounds, mine[kRssGrown] != 0 ? ", RSS grew" : "",
                     mine[kFdsChanged] != 0 ? ", file descriptors changed" : "",
                     mine[kShmMappingsChanged] != 0 ? ", shared-memory mappings changed" : "");
    return failed ? 1 : 0;
}
