#include "soak.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
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

// Not send and recv: a rank's random call would have no partner.
const nnpccl_collective_t kSoakCollectives[] = {
    NNPCCL_COLL_ALLREDUCE, NNPCCL_COLL_REDUCE_SCATTER, NNPCCL_COLL_ALLGATHER, NNPCCL_COLL_BROADCAST, NNPCCL_COLL_REDUCE,
    NNPCCL_COLL_BARRIER,   NNPCCL_COLL_GATHER,         NNPCCL_COLL_SCATTER,   NNPCCL_COLL_ALLTOALL};

// What the soak did and found on this rank.
struct SoakCounts {
    uint64_t ops = 0, bytes = 0, wrong = 0, out_of_bounds = 0;
};

// The process's resources at the start and at half time (or at the end of a
// run too short to warm up), to compare with the end.
struct Baseline {
    long rss_start = 0;
    int shm_start = 0;
    long rss_before = -1;
    int fds_before = -1;
};

// Operation `op` of the mix: every rank draws the same from `rng`.
nnpccl_check::CallShape next_call(std::mt19937_64 &rng, uint64_t op, int rank, int nranks, size_t max_bytes) {
    nnpccl_check::CallShape s;
    s.rank = rank;
    s.nranks = nranks;
    const bool opening = op < 2 * std::size(kSoakCollectives);
    if (opening) {
        // First each collective once at the largest size, out of place and
        // in place: scratch and caches reach their largest before half time,
        // so that growth after it is a leak, and the peak (VmHWM) is that of
        // the largest calls.
        s.collective = kSoakCollectives[op / 2];
        s.dt = NNPCCL_FLOAT32;
        s.op = NNPCCL_SUM;
        s.root = 0;
        s.in_place = op % 2 == 1;
    } else {
        s.collective = kSoakCollectives[rng() % std::size(kSoakCollectives)];
        s.dt = static_cast<nnpccl_datatype_t>(rng() % NNPCCL_NUM_DATATYPES);
        s.op = static_cast<nnpccl_redop_t>(rng() % NNPCCL_NUM_OPS);
        s.root = static_cast<int>(rng() % static_cast<uint64_t>(nranks));
        s.in_place = rng() % 2 == 0;
    }
    const size_t es = nnpccl_datatype_size(s.dt);
    const size_t most = std::max<size_t>(1, max_bytes / es / (s.blockwise() ? static_cast<size_t>(nranks) : 1));
    if (opening) {
        s.count = most;
    } else {
        // Log-uniform sizes from one element to max_bytes in all, and some empty calls.
        double exponent = std::uniform_real_distribution<double>(0, std::log2(static_cast<double>(most)))(rng);
        s.count = rng() % 16 == 0 ? 0 : std::min(most, static_cast<size_t>(std::exp2(exponent)));
    }
    return s;
}

// Runs the call on buffers with a guard zone behind the output and checks
// it; false when the call failed.
bool run_checked(nnpccl_comm_t comm, const nnpccl_check::CallShape &s, std::vector<unsigned char> &send,
                 std::vector<unsigned char> &recv, SoakCounts *counts) {
    const void *sp = nullptr;
    void *rp = nullptr;
    nnpccl_check::lay_out(s, send.data(), recv.data(), &sp, &rp);
    const size_t written = nnpccl_check::bytes_written(s);
    std::memset(recv.data() + written, 0xa5, kGuard);
    if (nnpccl_check::issue(comm, s, sp, rp) != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "soak: rank %d: operation %" PRIu64 " failed: %s\n", s.rank, counts->ops,
                     nnpccl_get_last_error(comm));
        return false;
    }
    if (s.collective != NNPCCL_COLL_BARRIER) {
        size_t bad = nnpccl_check::count_wrong(s, rp);
        if (bad != 0)
            std::fprintf(stderr, "soak: rank %d: %s of %zu %s (%s) had %zu wrong values\n", s.rank,
                         nnpccl_collective_name(s.collective), s.count, nnpccl_datatype_name(s.dt),
                         s.in_place ? "in place" : "out of place", bad);
        counts->wrong += bad;
        for (size_t i = 0; i < kGuard; ++i) counts->out_of_bounds += recv[written + i] != 0xa5;
        counts->bytes += s.total() * nnpccl_datatype_size(s.dt);
    }
    ++counts->ops;
    return true;
}

// Rank 0 keeps the time; everyone stops together. Sets *go_on, and takes
// the half-time baseline the first time rank 0 says it is reached. False
// when the broadcast failed.
bool agree_on_time(nnpccl_comm_t comm, int rank, double elapsed, double seconds, bool *go_on, Baseline *base) {
    int32_t state[2] = {elapsed < seconds, elapsed >= seconds / 2}; // go on; warmed up
    if (nnpccl_broadcast(state, state, 2, NNPCCL_INT32, 0, comm) != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "soak: rank %d: broadcast of the go-on flag failed: %s\n", rank,
                     nnpccl_get_last_error(comm));
        return false;
    }
    if ((state[0] != 0 && state[0] != 1) || (state[1] != 0 && state[1] != 1)) {
        std::fprintf(stderr, "soak: rank %d: broadcast of the go-on flag gave %d %d, not flags\n", rank, state[0],
                     state[1]);
        return false;
    }
    *go_on = state[0] != 0;
    if (state[1] != 0 && base->rss_before < 0) {
        base->rss_before = rss_kib();
        base->fds_before = open_fds();
    }
    return true;
}

// This rank's memory figures (kMemoryFigures), each at least 0.
void memory_figures(long rss_after, size_t own_bytes, uint64_t (&memory)[kMemoryFigures]) {
    long shm_rss = 0, shm_pss = 0;
    shm_resident_kib(&shm_rss, &shm_pss);
    const long hwm = proc_kib("/proc/self/status", "VmHWM");
    const long own = static_cast<long>(own_bytes >> 10);
    const long figures[kMemoryFigures] = {hwm, rss_after, proc_kib("/proc/self/smaps_rollup", "Pss"), shm_rss, shm_pss,
                                          own, hwm - own};
    for (int m = 0; m < kMemoryFigures; ++m) memory[m] = static_cast<uint64_t>(std::max(figures[m], 0L));
}

// What the end of the soak found on this rank, and over all ranks.
struct Verdict {
    uint64_t mine[kTallies] = {};
    uint64_t all[kTallies] = {};
    bool summed = false;
    bool mine_failed = false; // this rank found something
    bool failed = false;
    uint64_t most_memory[kMemoryFigures] = {};
    bool memory_known = false;
    long rss_after = 0;
    int fds_after = 0, shm_after = 0;
};

void print_report(int nranks, double elapsed, uint64_t seed, const SoakCounts &counts, const Baseline &base,
                  const Verdict &v) {
    const uint64_t *all = v.all;
    const char *scope = v.summed ? "" : " (rank 0 alone: the sum over ranks failed)";
    std::printf("# soak: %d ranks, %.1f s, seed %" PRIu64 "\n", nranks, elapsed, seed);
    std::printf("# operations      : %" PRIu64 " (%.0f per second)\n", counts.ops,
                static_cast<double>(counts.ops) / elapsed);
    std::printf("# bytes checked   : %" PRIu64 " per rank\n", counts.bytes);
    std::printf("# wrong values    : %" PRIu64 " %s%s\n", all[kWrong], all[kWrong] == 0 ? "OK" : "FAILED", scope);
    std::printf("# out of bounds   : %" PRIu64 " %s%s\n", all[kOutOfBounds], all[kOutOfBounds] == 0 ? "OK" : "FAILED",
                scope);
    std::printf("# rank 0 RSS      : %ld KiB at start, %ld KiB at half time, %ld KiB at the end%s\n", base.rss_start,
                base.rss_before, v.rss_after,
                all[kRssGrown] == 0 ? "" : "  (FAILED: a rank grew by more than the bound)");
    if (kRssBounded)
        std::printf("# RSS bound       : %ld KiB of growth per rank from half time to the end\n", kRssGrowthKiB);
    else
        std::printf(
            "# RSS bound       : none under AddressSanitizer (its quarantine grows; it checks leaks at exit)\n");
    // Not part of the verdict: what the footprint is, for the reader
    // (tests/soak_test.sh holds the queues to NNPCCL_SHM_BYTES).
    const char *over = v.memory_known ? "max over ranks" : "rank 0 alone: the max over ranks failed";
    const uint64_t *most = v.most_memory;
    std::printf("# memory (%s): VmHWM %" PRIu64 " KiB, VmRSS %" PRIu64 " KiB at the end, Pss %" PRIu64 " KiB\n", over,
                most[kHwm], most[kRss], most[kPss]);
    std::printf("# memory (%s): the soak's own buffers %" PRIu64 " KiB; the rest (nnpccl, the program, libc) %" PRIu64
                " KiB at the peak\n",
                over, most[kOwnBuffers], most[kLibraryPeak]);
    std::printf("# memory (%s): shared-memory queues %" PRIu64 " KiB resident, %" PRIu64 " KiB Pss\n", over,
                most[kShmRss], most[kShmPss]);
    std::printf("# rank 0 open fds : %d at half time, %d at the end%s\n", base.fds_before, v.fds_after,
                all[kFdsChanged] == 0 ? "" : "  (FAILED: a rank's count changed)");
    std::printf("# rank 0 shared-memory mappings: %d at start, %d at the end%s\n", base.shm_start, v.shm_after,
                all[kShmMappingsChanged] == 0 ? "" : "  (FAILED: a rank's count changed)");
    std::printf("# soak %s\n", v.failed ? "FAILED" : "OK");
    std::fflush(stdout);
}

// Compares the end with the baseline, sums the findings over the ranks and
// takes the largest memory figures.
Verdict judge(nnpccl_comm_t comm, int rank, int nranks, const SoakCounts &counts, const Baseline &base,
              size_t own_bytes) {
    Verdict v;
    v.rss_after = rss_kib();
    v.fds_after = open_fds();
    v.shm_after = shm_mappings();
    uint64_t *mine = v.mine;
    mine[kOnes] = 1;
    mine[kRankSum] = static_cast<uint64_t>(rank) + 1;
    mine[kWrong] = counts.wrong;
    mine[kOutOfBounds] = counts.out_of_bounds;
    mine[kRssGrown] = kRssBounded && v.rss_after - base.rss_before > kRssGrowthKiB ? 1 : 0;
    mine[kFdsChanged] = v.fds_after != base.fds_before ? 1 : 0;
    mine[kShmMappingsChanged] = v.shm_after != base.shm_start ? 1 : 0;
    if (mine[kRssGrown] != 0)
        std::fprintf(stderr, "soak: rank %d: RSS grew from %ld KiB at half time to %ld KiB (bound: %ld KiB)\n", rank,
                     base.rss_before, v.rss_after, kRssGrowthKiB);
    if (mine[kFdsChanged] != 0)
        std::fprintf(stderr, "soak: rank %d: %d open file descriptors at half time, %d at the end\n", rank,
                     base.fds_before, v.fds_after);
    uint64_t memory[kMemoryFigures] = {};
    memory_figures(v.rss_after, own_bytes, memory);
    v.memory_known =
        nnpccl_allreduce(memory, v.most_memory, kMemoryFigures, NNPCCL_UINT64, NNPCCL_MAX, comm) == NNPCCL_SUCCESS;
    if (!v.memory_known) std::copy(std::begin(memory), std::end(memory), std::begin(v.most_memory));
    v.summed = sum_tallies(comm, rank, nranks, v.mine, v.all);
    for (int t = kWrong; t < kTallies; ++t) v.mine_failed = v.mine_failed || mine[t] != 0;
    if (!v.summed) std::copy(std::begin(v.mine), std::end(v.mine), std::begin(v.all)); // what this rank knows
    // A rank that found something fails whatever the sum says.
    v.failed = !v.summed || v.mine_failed;
    for (int t = kWrong; t < kTallies; ++t) v.failed = v.failed || v.all[t] != 0;
    return v;
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
    Baseline base;
    base.rss_start = rss_kib();
    base.shm_start = shm_mappings();
    // Buffers, transport slots, libfabric's buffer pools and the schedule
    // cache fill during the first operations (over the tcp provider, for
    // about a minute); a leak keeps growing with the operation count. So the
    // baseline is taken at half time, and a soak for a verdict runs 2 minutes
    // or more.
    const auto t0 = std::chrono::steady_clock::now();
    const auto elapsed = [&t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    SoakCounts counts;
    for (bool go_on = true; go_on;) {
        if (!run_checked(comm, next_call(rng, counts.ops, rank, nranks, max_bytes), send, recv, &counts)) return 1;
        if (counts.ops % 64 == 0 && !agree_on_time(comm, rank, elapsed(), seconds, &go_on, &base)) return 1;
    }
    const double took = elapsed();
    if (base.rss_before < 0) { // a run too short to warm up: compare with the start
        base.rss_before = base.rss_start;
        base.fds_before = open_fds();
    }
    const Verdict v = judge(comm, rank, nranks, counts, base, send.size() + recv.size());
    if (rank == 0) print_report(nranks, took, seed, counts, base, v);
    if (v.mine_failed)
        std::fprintf(stderr,
                     "soak: rank %d FAILED: %" PRIu64 " wrong values, %" PRIu64 " written out of bounds%s%s%s\n", rank,
                     counts.wrong, counts.out_of_bounds, v.mine[kRssGrown] != 0 ? ", RSS grew" : "",
                     v.mine[kFdsChanged] != 0 ? ", file descriptors changed" : "",
                     v.mine[kShmMappingsChanged] != 0 ? ", shared-memory mappings changed" : "");
    return v.failed ? 1 : 0;
}
