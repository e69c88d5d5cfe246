// ccl-bench: measures nnpccl's collectives the way nccl-tests measures
// NCCL, with the same flags and the same table, so existing habits and
// parsers work. Run `ccl-bench --help`.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "check_data.hpp"
#include "comm.hpp"
#include "config.hpp"
#include "dtype.hpp"
#include "explain.hpp"
#include "local_launch.hpp"
#include "registry.hpp"
#include "soak.hpp"
#include "nnpccl.h"

namespace {

using nnpccl::Collective;

struct CollInfo {
    const char *name;
    Collective coll; // sendrecv: Send (and its Recv)
    // sendrecv, as nccl-tests's sendrecv_perf: every rank sends to rank+1 and
    // receives from rank-1 at once (an isend and an irecv, then both waits).
    bool exchange = false;
};

const CollInfo kColls[] = {
    {"allreduce", Collective::Allreduce}, {"reduce_scatter", Collective::ReduceScatter},
    {"allgather", Collective::Allgather}, {"broadcast", Collective::Broadcast},
    {"reduce", Collective::Reduce},       {"gather", Collective::Gather},
    {"scatter", Collective::Scatter},     {"alltoall", Collective::Alltoall},
    {"sendrecv", Collective::Send, true},
};

struct Options {
    const CollInfo *coll = nullptr;
    size_t min_bytes = 32 << 20;
    size_t max_bytes = 32 << 20;
    size_t step_factor = 1;
    size_t step_bytes = 0; // -i: linear steps instead of a factor
    int iters = 20;
    int warmup = 5;
    int check = 1;
    nnpccl_datatype_t dt = NNPCCL_FLOAT32;
    nnpccl_redop_t op = NNPCCL_SUM;
    int root = 0;
    int np = 0;
    double soak_seconds = 0;
    std::string json_path;
    bool explain = false; // print the planner's predictions instead of running
    int compare_rounds = 0; // --compare: rounds of every algorithm interleaved, instead of the sweep
};

const char kUsage[] =
    "usage: ccl-bench COLLECTIVE [options]   or   ccl-bench --soak SECONDS [options]\n"
    "  COLLECTIVE      allreduce | reduce_scatter | allgather | broadcast | reduce | gather |\n"
    "                  scatter | alltoall | sendrecv (each rank sends to rank+1 and receives\n"
    "                  from rank-1 at once; it has no in-place form: those columns say N/A)\n"
    "  -b, --minbytes  smallest size in bytes (K, M, G suffixes), default 32M\n"
    "  -e, --maxbytes  largest size, default 32M\n"
    "  -f, --stepfactor  multiply the size by this each step, default 1 (2 when -e > -b)\n"
    "  -i, --stepbytes  add this many bytes each step instead\n"
    "  -n, --iters     timed iterations per size, default 20\n"
    "  -w, --warmup_iters  untimed iterations first, default 5\n"
    "  -c, --check     1: verify every result bit for bit (default), 0: do not\n"
    "  -d, --datatype  int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double\n"
    "  -o, --op        sum prod min max avg\n"
    "  -r, --root      root rank of broadcast, reduce, gather and scatter, default 0\n"
    "  -J, --output_file  also write the results as JSON to this file\n"
    "  --transport T   auto (shm within a host, ofi across hosts), shm, or ofi (libfabric,\n"
    "                  NNPCCL_OFI_PROVIDER picks the provider); sets NNPCCL_TRANSPORT\n"
    "  --topo T        plan on this machine: a preset (flat, ring:N, fc:N, hcm8, torus:XxY,\n"
    "                  nnpt-ring8, nnpt-hcm8, nnpt-pod32, nnpt-pod1024) or a topology file;\n"
    "                  sets NNPCCL_TOPO (NNPCCL_EMULATE_LINKS=1 also paces traffic to its links)\n"
    "  --soak SECONDS  instead of a sweep: a random mix of every collective, size (up to -e),\n"
    "                  datatype and op, all checked, then ops, bytes, wrong values, RSS and fds\n"
    "  --np N          start N ranks on this host; without it the launcher's environment\n"
    "                  (mpirun, mpiexec, srun, torchrun-style RANK/WORLD_SIZE) is used\n"
    "  --algo NAME     force algorithm NAME for COLLECTIVE (sets NNPCCL_ALGO=COLLECTIVE:NAME);\n"
    "                  the call fails if NAME does not apply on the topology\n"
    "  --explain       run nothing: per size, each algorithm's predicted time and busbw on the\n"
    "                  topology (--topo, --np ranks), the planner's choice marked, and the bound\n"
    "  --list-algos    list the algorithms: the collectives each serves, when it applies\n"
    "  --compare R     per size, every algorithm serving COLLECTIVE forced and the selector's own\n"
    "                  choice, out of place, each on a communicator of its own, in R rounds of -n\n"
    "                  calls that take turns; prints each one's median time, the choice, and its\n"
    "                  forced time over the fastest forced one (the selector's error)\n"
    "The table matches nccl-tests: out-of-place then in-place columns; busbw = algbw x\n"
    "2(n-1)/n for allreduce, (n-1)/n for reduce_scatter, allgather, gather, scatter and\n"
    "alltoall (size: the whole buffer of n blocks), 1 otherwise.\n";

[[noreturn]] void usage_error(const std::string &why) {
    std::fprintf(stderr, "ccl-bench: %s\n%s", why.c_str(), kUsage);
    std::exit(2);
}

size_t parse_size_arg(const char *flag, const char *text) {
    auto v = nnpccl::parse_size(text);
    if (!v) usage_error(std::string(flag) + " " + text + " is not a size");
    return *v;
}

int parse_int_arg(const char *flag, const char *text, int min) {
    char *end = nullptr;
    long v = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || v < min || v > 1 << 30)
        usage_error(std::string(flag) + " " + text + " is not a whole number >= " + std::to_string(min));
    return static_cast<int>(v);
}

Options parse_options(int argc, char **argv) {
    Options o;
    bool factor_given = false;
    std::string algo;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        auto next = [&]() -> const char * {
            if (i + 1 >= argc) usage_error(a + " needs a value");
            return argv[++i];
        };
        if (a[0] != '-') {
            if (o.coll != nullptr) usage_error("unexpected argument '" + a + "'");
            for (const CollInfo &c : kColls)
                if (a == c.name) o.coll = &c;
            if (o.coll == nullptr) usage_error("unknown collective '" + a + "'");
        } else if (a == "-b" || a == "--minbytes") o.min_bytes = parse_size_arg("-b", next());
        else if (a == "-e" || a == "--maxbytes") o.max_bytes = parse_size_arg("-e", next());
        else if (a == "-f" || a == "--stepfactor") {
            o.step_factor = static_cast<size_t>(parse_int_arg("-f", next(), 1));
            factor_given = true;
        } else if (a == "-i" || a == "--stepbytes") o.step_bytes = parse_size_arg("-i", next());
        else if (a == "-n" || a == "--iters") o.iters = parse_int_arg("-n", next(), 1);
        else if (a == "-w" || a == "--warmup_iters") o.warmup = parse_int_arg("-w", next(), 0);
        else if (a == "-c" || a == "--check") o.check = parse_int_arg("-c", next(), 0) != 0;
        else if (a == "-d" || a == "--datatype") {
            const char *v = next();
            if (!nnpccl::parse_datatype(v, &o.dt)) usage_error(std::string("unknown datatype '") + v + "'");
        } else if (a == "-o" || a == "--op") {
            const char *v = next();
            if (!nnpccl::parse_redop(v, &o.op)) usage_error(std::string("unknown op '") + v + "'");
        } else if (a == "-r" || a == "--root") o.root = parse_int_arg("-r", next(), 0);
        else if (a == "-J" || a == "--output_file") o.json_path = next();
        else if (a == "--np") o.np = parse_int_arg("--np", next(), 1);
        else if (a == "--soak") o.soak_seconds = parse_int_arg("--soak", next(), 1);
        else if (a == "--topo") setenv("NNPCCL_TOPO", next(), 1); // every rank inherits it
        else if (a == "--algo") algo = next();
        else if (a == "--explain") o.explain = true;
        else if (a == "--compare") o.compare_rounds = parse_int_arg("--compare", next(), 1);
        else if (a == "--list-algos") {
            nnpccl_bench::print_algorithm_list();
            std::exit(0);
        }
        else if (a == "--transport") {
            std::string t = next();
            if (t != "auto" && t != "shm" && t != "ofi") usage_error("--transport " + t + " is not auto, shm or ofi");
            setenv("NNPCCL_TRANSPORT", t.c_str(), 1); // every rank inherits it
        }
        else usage_error("unknown option '" + a + "'");
    }
    if (o.coll == nullptr && o.soak_seconds == 0) usage_error("name a collective (or --soak SECONDS)");
    if (o.coll == nullptr) o.coll = &kColls[0];
    if (!algo.empty()) {
        std::string error;
        if (!nnpccl_bench::check_algorithm_name(o.coll->coll, algo, &error)) usage_error("--algo: " + error);
        // Every rank inherits it; an exchange is a send and a recv.
        const std::string forced = o.coll->exchange ? "send:" + algo + ";recv:" + algo : o.coll->name + (":" + algo);
        setenv("NNPCCL_ALGO", forced.c_str(), 1);
    }
    if (o.compare_rounds > 0) {
        if (!algo.empty()) usage_error("--compare runs every algorithm: it takes no --algo");
        if (o.coll->exchange || o.soak_seconds > 0) usage_error("--compare needs a collective (not sendrecv, not --soak)");
    }
    if (o.max_bytes < o.min_bytes && o.soak_seconds == 0) usage_error("-e is smaller than -b");
    if (!factor_given && o.step_bytes == 0 && o.max_bytes > o.min_bytes) o.step_factor = 2;
    return o;
}

// Page-aligned memory with a guard zone after `bytes`, to catch writes past the end.
constexpr size_t kGuardBytes = 4096;
constexpr unsigned char kGuardByte = 0xa5;

struct GuardedBuffer {
    unsigned char *data = nullptr;
    size_t bytes = 0;
    explicit GuardedBuffer(size_t n) : bytes(n) {
        void *p = mmap(nullptr, n + kGuardBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            std::perror("ccl-bench: mmap");
            std::exit(2);
        }
        data = static_cast<unsigned char *>(p);
    }
    ~GuardedBuffer() { munmap(data, bytes + kGuardBytes); }
    // Guard everything from `used` bytes on.
    void arm(size_t used) { std::memset(data + used, kGuardByte, bytes + kGuardBytes - used); }
    size_t damaged(size_t used) const {
        size_t n = 0;
        for (size_t i = used; i < bytes + kGuardBytes; ++i) n += data[i] != kGuardByte;
        return n;
    }
};

struct Result {
    double time_us = 0;
    double algbw = 0;
    double busbw = 0;
    uint64_t wrong = 0;
    uint64_t out_of_bounds = 0;
    bool not_applicable = false; // the in-place columns of sendrecv
};

// nccl-tests's number formatting: as many decimals as the width allows.
std::string fmt_num(double v, int width) {
    char buf[32];
    int power = 0;
    for (double p = 1; v >= p && power < 30; p *= 10) ++power;
    if (power < width - 2) std::snprintf(buf, sizeof buf, "%*.2f", width, v);
    else if (power < width - 1) std::snprintf(buf, sizeof buf, "%*.1f", width, v);
    else if (power < width + 1) std::snprintf(buf, sizeof buf, "%*.0f", width, v);
    else std::snprintf(buf, sizeof buf, "%*.1e", width, v);
    return buf;
}

class Bench {
public:
    Bench(const Options &o, nnpccl_comm_t comm, int rank, int nranks)
        : o_(o), comm_(comm), rank_(rank), nranks_(nranks), elem_(nnpccl::datatype_size(o.dt)) {}
    int run();
    // --compare: see kUsage.
    int compare();

private:
    nnpccl_check::CallShape shape(size_t total, bool in_place) const;
    // The receiving half of an exchange whose sending half is `send_shape`.
    nnpccl_check::CallShape recv_shape(const nnpccl_check::CallShape &send_shape) const;
    nnpccl_result_t call(nnpccl_comm_t comm, const void *send, void *recv, const nnpccl_check::CallShape &s);
    // Mean µs per call over `iters` calls on `comm` after `warmup` more, averaged over the ranks.
    double time_calls(nnpccl_comm_t comm, const void *send, void *recv, const nnpccl_check::CallShape &s, int warmup,
                      int iters);
    // Lays out the buffers for the call and arms their guards.
    void prepare(const nnpccl_check::CallShape &s, const void **send, void **recv);
    // Runs the call once more on prepared buffers; wrong values and bytes out of bounds, summed over the ranks.
    void check(nnpccl_comm_t comm, const nnpccl_check::CallShape &s, Result *res);
    // The sweep's sizes, in elements (the table's count column).
    std::vector<size_t> sizes() const;
    // Buffers for every size of the sweep.
    void allocate(const std::vector<size_t> &totals);
    Result measure(size_t total, bool in_place);
    double sum_over_ranks(double v);
    void fail(const char *what, nnpccl_result_t rc);

    const Options &o_;
    nnpccl_comm_t comm_;
    int rank_, nranks_;
    size_t elem_;
    std::unique_ptr<GuardedBuffer> send_buf_, recv_buf_;
};

void Bench::fail(const char *what, nnpccl_result_t rc) {
    std::fprintf(stderr, "ccl-bench: rank %d: %s failed: %s: %s\n", rank_, what, nnpccl_get_error_string(rc),
                 nnpccl_get_last_error(comm_));
    std::fflush(stderr);
    nnpccl_comm_abort(comm_);
    std::exit(1);
}

// `total` is the whole buffer in elements, as the table's count column shows it.
nnpccl_check::CallShape Bench::shape(size_t total, bool in_place) const {
    nnpccl_check::CallShape s;
    s.collective = o_.coll->coll;
    s.rank = rank_;
    s.nranks = nranks_;
    s.count = s.blockwise() ? total / static_cast<size_t>(nranks_) : total;
    s.root = o_.coll->exchange ? (rank_ + 1) % nranks_ : o_.root;
    s.dt = o_.dt;
    s.op = o_.op;
    s.in_place = in_place;
    return s;
}

nnpccl_check::CallShape Bench::recv_shape(const nnpccl_check::CallShape &send_shape) const {
    nnpccl_check::CallShape r = send_shape;
    r.collective = Collective::Recv;
    r.root = (rank_ + nranks_ - 1) % nranks_;
    return r;
}

nnpccl_result_t Bench::call(nnpccl_comm_t comm, const void *send, void *recv, const nnpccl_check::CallShape &s) {
    if (!o_.coll->exchange) return nnpccl_check::issue(comm, s, send, recv);
    const int from = recv_shape(s).root;
    nnpccl_request_t sent = nullptr, received = nullptr;
    nnpccl_result_t rc = nnpccl_isend(send, s.count, s.dt, s.root, comm, &sent);
    if (rc != NNPCCL_SUCCESS) return rc;
    rc = nnpccl_irecv(recv, s.count, s.dt, from, comm, &received);
    if (rc != NNPCCL_SUCCESS) {
        nnpccl_wait(sent);
        return rc;
    }
    nnpccl_result_t rc_send = nnpccl_wait(sent);
    nnpccl_result_t rc_recv = nnpccl_wait(received);
    return rc_send != NNPCCL_SUCCESS ? rc_send : rc_recv;
}

double Bench::sum_over_ranks(double v) {
    double out = 0;
    nnpccl_result_t rc = nnpccl_allreduce(&v, &out, 1, NNPCCL_FLOAT64, NNPCCL_SUM, comm_);
    if (rc != NNPCCL_SUCCESS) fail("allreduce of the results", rc);
    return out;
}

void Bench::prepare(const nnpccl_check::CallShape &sh, const void **send, void **recv) {
    send_buf_->arm(0);
    recv_buf_->arm(0);
    nnpccl_check::lay_out(sh, send_buf_->data, recv_buf_->data, send, recv);
    send_buf_->arm(sh.in_place ? 0 : sh.send_elems() * elem_);
    recv_buf_->arm(sh.in_place ? sh.total() * elem_ : 0);
}

double Bench::time_calls(nnpccl_comm_t comm, const void *send, void *recv, const nnpccl_check::CallShape &sh,
                         int warmup, int iters) {
    for (int i = 0; i < warmup; ++i)
        if (nnpccl_result_t rc = call(comm, send, recv, sh); rc != NNPCCL_SUCCESS) fail(o_.coll->name, rc);
    if (nnpccl_result_t rc = nnpccl_barrier(comm); rc != NNPCCL_SUCCESS) fail("barrier", rc);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
        if (nnpccl_result_t rc = call(comm, send, recv, sh); rc != NNPCCL_SUCCESS) fail(o_.coll->name, rc);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    return sum_over_ranks(seconds) / nranks_ * 1e6;
}

void Bench::check(nnpccl_comm_t comm, const nnpccl_check::CallShape &sh, Result *res) {
    // What the output is checked against: the call's own shape, or an exchange's receiving half.
    const nnpccl_check::CallShape out_shape = o_.coll->exchange ? recv_shape(sh) : sh;
    const void *send = nullptr;
    void *recv = nullptr;
    prepare(sh, &send, &recv);
    if (nnpccl_result_t rc = call(comm, send, recv, sh); rc != NNPCCL_SUCCESS) fail(o_.coll->name, rc);
    uint64_t wrong = nnpccl_check::count_wrong(out_shape, recv);
    // Nothing may be written past what the call owns, nor into the send buffer's guard.
    uint64_t oob = recv_buf_->damaged(nnpccl_check::bytes_written(out_shape));
    if (!sh.in_place) oob += send_buf_->damaged(sh.send_elems() * elem_);
    res->wrong = static_cast<uint64_t>(sum_over_ranks(static_cast<double>(wrong)));
    res->out_of_bounds = static_cast<uint64_t>(sum_over_ranks(static_cast<double>(oob)));
}

Result Bench::measure(size_t total, bool in_place) {
    Result res;
    // Sending from and receiving into one buffer at once is no exchange.
    if (o_.coll->exchange && in_place) {
        res.not_applicable = true;
        return res;
    }
    const nnpccl_check::CallShape sh = shape(total, in_place);
    const void *send = nullptr;
    void *recv = nullptr;
    prepare(sh, &send, &recv);
    res.time_us = time_calls(comm_, send, recv, sh, o_.warmup, o_.iters);
    const double seconds = res.time_us / 1e6;
    const double bytes = static_cast<double>(total * elem_);
    res.algbw = seconds > 0 ? bytes / seconds / 1e9 : 0;
    double factor = 1;
    if (sh.collective == Collective::Allreduce) factor = 2.0 * (nranks_ - 1) / nranks_;
    if (sh.blockwise()) factor = static_cast<double>(nranks_ - 1) / nranks_;
    res.busbw = res.algbw * factor;
    if (o_.check) check(comm_, sh, &res);
    return res;
}

std::vector<size_t> Bench::sizes() const {
    // Every size of the sweep, rounded down to whole elements (and whole blocks).
    std::vector<size_t> totals;
    const size_t unit = elem_ * (shape(0, false).blockwise() ? static_cast<size_t>(nranks_) : 1);
    for (size_t bytes = o_.min_bytes; bytes <= o_.max_bytes;) {
        totals.push_back(bytes / unit * unit / elem_);
        size_t next = o_.step_bytes != 0 ? bytes + o_.step_bytes : bytes * o_.step_factor;
        if (next <= bytes) break;
        bytes = next;
    }
    return totals;
}

void Bench::allocate(const std::vector<size_t> &totals) {
    const size_t max_total = *std::max_element(totals.begin(), totals.end());
    send_buf_ = std::make_unique<GuardedBuffer>(std::max<size_t>(shape(max_total, false).send_elems() * elem_, elem_));
    recv_buf_ = std::make_unique<GuardedBuffer>(std::max<size_t>(max_total * elem_, elem_));
}

// Every algorithm serving the collective runs on a communicator of its own
// that forces it (config->algorithms), the selector's choice on comm_. Per
// size each takes its turn for -n calls, R rounds, a different one first
// each round: a machine whose speed drifts (a VM whose cores change speed
// with its neighbours' load, 2-10x here) then slows them alike, where
// separate runs would compare one machine state against another.
int Bench::compare() {
    struct Candidate {
        std::string name;
        nnpccl_comm_t comm = nullptr;
    };
    std::vector<Candidate> candidates;
    for (const nnpccl::AlgorithmInfo &a : nnpccl::algorithm_registry())
        if (a.serves_collective(o_.coll->coll)) candidates.push_back({a.name});
    for (Candidate &c : candidates) {
        nnpccl_unique_id_t id{};
        nnpccl_result_t rc = rank_ == 0 ? nnpccl_get_unique_id(&id) : NNPCCL_SUCCESS;
        if (rc != NNPCCL_SUCCESS) fail("get_unique_id", rc);
        rc = nnpccl_broadcast(&id, &id, sizeof id, NNPCCL_UINT8, 0, comm_);
        if (rc != NNPCCL_SUCCESS) fail("broadcast of a unique id", rc);
        const std::string forced = std::string(o_.coll->name) + ":" + c.name;
        nnpccl_config_t config = NNPCCL_CONFIG_INIT;
        config.algorithms = forced.c_str();
        rc = nnpccl_comm_init_rank(&c.comm, nranks_, id, rank_, &config);
        if (rc != NNPCCL_SUCCESS) fail(("init of a communicator forcing " + forced).c_str(), rc);
    }
    const size_t selector = candidates.size(); // comm_, after the forced ones
    auto comm_of = [&](size_t k) { return k == selector ? comm_ : candidates[k].comm; };

    const std::vector<size_t> totals = sizes();
    allocate(totals);
    if (rank_ == 0) {
        std::printf("# ccl-bench %s --compare %d: nnpccl %d.%d.%d, %d ranks, out of place, %s %s; per size %d "
                    "rounds of -n %d calls of each, taking turns; median time per call (us)\n",
                    o_.coll->name, o_.compare_rounds, NNPCCL_MAJOR, NNPCCL_MINOR, NNPCCL_PATCH, nranks_,
                    nnpccl::datatype_name(o_.dt), nnpccl::reduces(o_.coll->coll) ? nnpccl::redop_name(o_.op) : "",
                    o_.compare_rounds, o_.iters);
        std::printf("# selector: the selector's own choice, run unforced; ratio: the choice forced over the "
                    "fastest forced\n#%11s", "size");
        for (const Candidate &c : candidates) std::printf("  %*s", static_cast<int>(std::max<size_t>(9, c.name.size())), c.name.c_str());
        std::printf("  %9s  %-20s  %-20s  %5s  %6s\n", "selector", "choice", "fastest", "ratio", "#wrong");
    }
    uint64_t wrong_total = 0, oob_total = 0;
    int misses = 0;
    for (size_t total : totals) {
        const nnpccl_check::CallShape sh = shape(total, false);
        const void *send = nullptr;
        void *recv = nullptr;
        prepare(sh, &send, &recv);
        // A forced algorithm that does not apply fails the call, on every
        // rank alike (the plan depends on no rank), and leaves the
        // communicator usable.
        std::vector<bool> applies(selector + 1, true);
        for (size_t k = 0; k < selector; ++k) {
            const nnpccl_result_t rc = call(comm_of(k), send, recv, sh);
            if (rc == NNPCCL_ERR_INVALID_USAGE) applies[k] = false;
            else if (rc != NNPCCL_SUCCESS) fail(o_.coll->name, rc);
        }
        std::vector<std::vector<double>> times(selector + 1);
        for (int round = 0; round < o_.compare_rounds; ++round)
            for (size_t turn = 0; turn <= selector; ++turn) {
                const size_t k = (turn + static_cast<size_t>(round)) % (selector + 1);
                if (applies[k])
                    times[k].push_back(time_calls(comm_of(k), send, recv, sh, round == 0 ? o_.warmup : 0, o_.iters));
            }
        Result checked;
        if (o_.check)
            for (size_t k = 0; k <= selector; ++k) {
                if (!applies[k]) continue;
                check(comm_of(k), sh, &checked);
                wrong_total += checked.wrong;
                oob_total += checked.out_of_bounds;
            }
        nnpccl::CollectiveCall c;
        c.collective = sh.collective;
        c.send = send;
        c.recv = recv;
        c.count = sh.count;
        c.datatype = sh.dt;
        c.op = sh.op;
        c.root = nnpccl::has_root(sh.collective) ? sh.root : -1;
        std::shared_ptr<const nnpccl::Schedule> chosen;
        if (!comm_->schedule_for(c, &chosen)) fail("planning", NNPCCL_ERR_INTERNAL);
        if (rank_ != 0) continue;
        std::vector<double> medians(selector + 1, 0);
        size_t fastest = selector, choice = selector;
        for (size_t k = 0; k <= selector; ++k) {
            if (!applies[k]) continue;
            std::vector<double> &t = times[k];
            std::sort(t.begin(), t.end());
            medians[k] = t.size() % 2 != 0 ? t[t.size() / 2] : (t[t.size() / 2 - 1] + t[t.size() / 2]) / 2;
            if (k < selector && (fastest == selector || medians[k] < medians[fastest])) fastest = k;
            if (k < selector && candidates[k].name == chosen->algorithm) choice = k;
        }
        const double ratio = choice == selector || fastest == selector ? 0 : medians[choice] / medians[fastest];
        misses += ratio > 1.10;
        std::printf("%12zu", total * elem_);
        for (size_t k = 0; k <= selector; ++k) {
            const int width = k == selector ? 9 : static_cast<int>(std::max<size_t>(9, candidates[k].name.size()));
            std::printf("  %*s", width, applies[k] ? fmt_num(medians[k], width).c_str() : "n/a");
        }
        std::printf("  %-20s  %-20s  %5.2f  %6" PRIu64 "%s\n", chosen->algorithm.c_str(),
                    fastest == selector ? "-" : candidates[fastest].name.c_str(), ratio,
                    o_.check ? checked.wrong : 0, ratio > 1.10 ? "  miss" : "");
        std::fflush(stdout);
    }
    if (rank_ == 0) {
        std::printf("# the choice is more than 10%% slower than the fastest forced algorithm at %d of %zu sizes\n",
                    misses, totals.size());
        std::printf("# Out of bounds values : %" PRIu64 " %s\n", oob_total, oob_total == 0 ? "OK" : "FAILED");
        if (wrong_total != 0) std::printf("# %" PRIu64 " wrong values: FAILED\n", wrong_total);
        std::fflush(stdout);
    }
    for (Candidate &c : candidates)
        if (nnpccl_result_t rc = nnpccl_comm_destroy(c.comm); rc != NNPCCL_SUCCESS) fail("destroy", rc);
    return (wrong_total != 0 || oob_total != 0) ? 1 : 0;
}

int Bench::run() {
    const std::vector<size_t> totals = sizes();
    allocate(totals);

    FILE *json = nullptr;
    if (rank_ == 0) {
        char host[256] = "?";
        gethostname(host, sizeof host - 1);
        std::printf("# ccl-bench %s: nnpccl %d.%d.%d, %d ranks\n", o_.coll->name, NNPCCL_MAJOR, NNPCCL_MINOR,
                    NNPCCL_PATCH, nranks_);
        std::printf("# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d validation: %d\n",
                    o_.min_bytes, o_.max_bytes, o_.step_bytes != 0 ? o_.step_bytes : o_.step_factor,
                    o_.step_bytes != 0 ? "bytes" : "factor", o_.warmup, o_.iters, o_.check);
        std::printf("#\n#  Rank  0 Pid %6d on %10s\n#\n", static_cast<int>(getpid()), host);
        std::printf("#                                                              out-of-place                       "
                    "in-place          \n");
        std::printf("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   "
                    "algbw   busbw  #wrong\n");
        std::printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  "
                    "(GB/s)  (GB/s)         \n");
        if (!o_.json_path.empty()) {
            json = std::fopen(o_.json_path.c_str(), "w");
            if (json == nullptr) std::fprintf(stderr, "ccl-bench: cannot write %s\n", o_.json_path.c_str());
            else std::fprintf(json, "{\"collective\":\"%s\",\"nranks\":%d,\"results\":[", o_.coll->name, nranks_);
        }
    }
    double busbw_sum = 0;
    int busbw_count = 0;
    uint64_t wrong_total = 0, oob_total = 0;
    bool first_row = true;
    for (size_t total : totals) {
        Result r[2] = {measure(total, false), measure(total, true)};
        for (const Result &x : r) {
            if (x.not_applicable) continue;
            busbw_sum += x.busbw;
            ++busbw_count;
            wrong_total += x.wrong;
            oob_total += x.out_of_bounds;
        }
        if (rank_ != 0) continue;
        const int root = nnpccl::has_root(o_.coll->coll) ? o_.root : -1;
        const char *opname = nnpccl::reduces(o_.coll->coll) ? nnpccl::redop_name(o_.op) : "none";
        std::printf("%12zu  %12zu  %8s  %6s  %6d", total * elem_, total, nnpccl::datatype_name(o_.dt), opname, root);
        for (const Result &x : r) {
            if (x.not_applicable) {
                std::printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
                continue;
            }
            std::printf("  %7s  %6s  %6s", fmt_num(x.time_us, 7).c_str(), fmt_num(x.algbw, 6).c_str(),
                        fmt_num(x.busbw, 6).c_str());
            if (o_.check) std::printf("  %6" PRIu64, x.wrong);
            else std::printf("     N/A");
        }
        std::printf("\n");
        std::fflush(stdout);
        if (json != nullptr) {
            std::fprintf(json, "%s{\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d", first_row ? "" : ",",
                         total * elem_, total, nnpccl::datatype_name(o_.dt), opname, root);
            const char *names[2] = {"out_of_place", "in_place"};
            for (int k = 0; k < 2; ++k)
                if (r[k].not_applicable) std::fprintf(json, ",\"%s\":null", names[k]);
                else std::fprintf(json, ",\"%s\":{\"time\":%.3f,\"alg_bw\":%.4f,\"bus_bw\":%.4f,\"nwrong\":%s}", names[k],
                             r[k].time_us, r[k].algbw, r[k].busbw,
                             o_.check ? std::to_string(r[k].wrong).c_str() : "null");
            std::fprintf(json, "}");
        }
        first_row = false;
    }
    const double avg_busbw = busbw_count > 0 ? busbw_sum / busbw_count : 0;
    if (rank_ == 0) {
        std::printf("# Out of bounds values : %" PRIu64 " %s\n", oob_total, oob_total == 0 ? "OK" : "FAILED");
        std::printf("# Avg bus bandwidth    : %g \n#\n", avg_busbw);
        if (wrong_total != 0) std::printf("# %" PRIu64 " wrong values: FAILED\n", wrong_total);
        if (json != nullptr) {
            std::fprintf(json, "],\"out_of_bounds\":%" PRIu64 ",\"avg_bus_bandwidth\":%g}\n", oob_total, avg_busbw);
            std::fclose(json);
        }
        std::fflush(stdout);
    }
    return (wrong_total != 0 || oob_total != 0) ? 1 : 0;
}

int run_rank(const Options &o, nnpccl_comm_t comm) {
    int rank = 0, nranks = 1;
    nnpccl_comm_rank(comm, &rank);
    nnpccl_comm_size(comm, &nranks);
    if (nnpccl::has_root(o.coll->coll) && o.root >= nranks) {
        if (rank == 0) std::fprintf(stderr, "ccl-bench: -r %d is not a rank of %d\n", o.root, nranks);
        nnpccl_comm_destroy(comm);
        return 2;
    }
    if (o.coll->exchange && o.soak_seconds == 0 && nranks < 2) {
        if (rank == 0) std::fprintf(stderr, "ccl-bench: sendrecv needs 2 ranks or more (a rank cannot send to itself)\n");
        nnpccl_comm_destroy(comm);
        return 2;
    }
    int status = o.soak_seconds > 0      ? run_soak(comm, rank, nranks, o.soak_seconds, o.max_bytes)
                 : o.compare_rounds > 0 ? Bench(o, comm, rank, nranks).compare()
                                        : Bench(o, comm, rank, nranks).run();
    nnpccl_result_t rc = nnpccl_comm_destroy(comm);
    if (rc != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "ccl-bench: rank %d: destroy failed: %s\n", rank, nnpccl_get_last_error(nullptr));
        return 1;
    }
    return status;
}

nnpccl_bench::ExplainRequest explain_request(const Options &o) {
    nnpccl_bench::ExplainRequest r;
    r.collective = o.coll->coll;
    r.topology = nnpccl::env_string("NNPCCL_TOPO");
    r.nranks = o.np;
    r.min_bytes = o.min_bytes;
    r.max_bytes = o.max_bytes;
    r.step_factor = o.step_factor;
    r.step_bytes = o.step_bytes;
    r.datatype = o.dt;
    // An exchange is planned as rank 0's send to rank 1.
    r.root = nnpccl::has_root(o.coll->coll) ? o.root : o.coll->exchange ? 1 : -1;
    return r;
}

} // namespace

int main(int argc, char **argv) {
    Options o = parse_options(argc, argv);
    if (o.explain) return nnpccl_bench::explain_plans(explain_request(o));
    if (o.np > 0) {
        return run_local_ranks(o.np, [&o](int rank, int nranks, const nnpccl_unique_id_t &id) {
            nnpccl_comm_t comm = nullptr;
            nnpccl_result_t rc = nnpccl_comm_init_rank(&comm, nranks, id, rank, nullptr);
            if (rc != NNPCCL_SUCCESS) {
                std::fprintf(stderr, "ccl-bench: rank %d: init failed: %s\n", rank, nnpccl_get_last_error(nullptr));
                return 1;
            }
            return run_rank(o, comm);
        });
    }
    nnpccl_comm_t comm = nullptr;
    nnpccl_result_t rc = nnpccl_comm_init_from_env(&comm, nullptr);
    if (rc != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "ccl-bench: init failed: %s\n(use --np N to start N ranks on this host)\n",
                     nnpccl_get_last_error(nullptr));
        return 1;
    }
    return run_rank(o, comm);
}
