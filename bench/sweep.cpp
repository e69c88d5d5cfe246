#include "sweep.hpp"

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
#include "nnpccl_inspect.h"
#include "number_format.hpp"
#include "tune.hpp"

namespace nnpccl_bench {

namespace {

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
    GuardedBuffer(const GuardedBuffer &) = delete;
    GuardedBuffer &operator=(const GuardedBuffer &) = delete;
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

// nccl-tests's number formatting, with three decimals below 1 (docs/design.md, "Benchmark output").
std::string fmt_num(double v, int width) { return nnpccl_tools::table_number(v, width, 3); }

// --compare's contenders: each algorithm serving the collective, forced.
struct Candidate {
    std::string name;
    std::string rules; // NNPCCL_ALGO's syntax
};

// --compare's figures over all sizes.
struct CompareTally {
    uint64_t wrong = 0, out_of_bounds = 0;
    int misses = 0, judged_sizes = 0;
    std::vector<std::pair<size_t, std::string>> winners; // --tune: bytes, fastest forced; rank 0's
};

class Bench {
public:
    Bench(const Options &o, nnpccl_comm_t comm, int rank, int nranks)
        : o_(o), comm_(comm), rank_(rank), nranks_(nranks), elem_(nnpccl_datatype_size(o.dt)) {}
    int run();
    // --compare: see kUsage.
    int compare();

private:
    nnpccl_check::CallShape shape(size_t total, bool in_place) const;
    // The receiving half of an exchange whose sending half is `send_shape`.
    nnpccl_check::CallShape recv_shape(const nnpccl_check::CallShape &send_shape) const;
    nnpccl_result_t call(nnpccl_comm_t comm, const void *send, void *recv, const nnpccl_check::CallShape &s);
    // The algorithm the next call like `c` runs ("" while the ranks measure)
    // and the calls the tuner still spends measuring.
    std::string next_algorithm(nnpccl_comm_t comm, const nnpccl_call_t &c, size_t *tuning_calls_left);
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

    // --compare's parts. Turn k runs candidate k forced, or the selector's
    // own choice for k == candidates_.size().
    void list_candidates();
    nnpccl_comm_t comm_for_turn(size_t k);
    void print_compare_header();
    void compare_size(size_t total, CompareTally *tally);
    std::vector<bool> applying_turns(const nnpccl_check::CallShape &sh, const void *send, void *recv);
    // `call` with the buffers it ran on, which tell the planner in place from out of place.
    void print_compare_row(size_t total, const nnpccl_call_t &call, const std::vector<bool> &applies,
                           std::vector<std::vector<double>> &times, uint64_t row_wrong, CompareTally *tally);
    int write_tune(size_t largest_total, const std::vector<std::pair<size_t, std::string>> &winners);
    std::vector<Candidate> candidates_;

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
    r.collective = NNPCCL_COLL_RECV;
    r.root = (rank_ + nranks_ - 1) % nranks_;
    return r;
}

nnpccl_call_t describe_call(const nnpccl_check::CallShape &sh, const void *send, void *recv) {
    nnpccl_call_t c{};
    c.collective = sh.collective;
    c.sendbuf = send;
    c.recvbuf = recv;
    c.count = sh.count;
    c.datatype = sh.dt;
    c.op = sh.op;
    c.root = nnpccl_check::has_root(sh.collective) ? sh.root : -1;
    return c;
}

std::string Bench::next_algorithm(nnpccl_comm_t comm, const nnpccl_call_t &c, size_t *tuning_calls_left) {
    char name[64];
    if (nnpccl_result_t rc = nnpccl_comm_get_algorithm(comm, &c, name, sizeof name, tuning_calls_left);
        rc != NNPCCL_SUCCESS)
        fail("planning", rc);
    return name;
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
    // The tuner's trials (src/tuner.hpp) are set-up, as warm-up is: the
    // timed calls run its decision. Every rank counts the same trials left.
    if (!o_.coll->exchange) {
        const nnpccl_call_t c = describe_call(sh, send, recv);
        size_t left = 0;
        while (next_algorithm(comm, c, &left), left > 0)
            if (nnpccl_result_t rc = call(comm, send, recv, sh); rc != NNPCCL_SUCCESS) fail(o_.coll->name, rc);
    }
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
    if (sh.collective == NNPCCL_COLL_ALLREDUCE) factor = 2.0 * (nranks_ - 1) / nranks_;
    if (sh.blockwise()) factor = static_cast<double>(nranks_ - 1) / nranks_;
    res.busbw = res.algbw * factor;
    if (o_.check) check(comm_, sh, &res);
    return res;
}

std::vector<size_t> Bench::sizes() const {
    // Every size of the sweep, rounded down to whole elements (and whole blocks).
    const size_t unit = elem_ * (shape(0, false).blockwise() ? static_cast<size_t>(nranks_) : 1);
    std::vector<size_t> totals = nnpccl_tools::sweep_sizes(o_.sizes, unit);
    for (size_t &total : totals) total /= elem_;
    return totals;
}

void Bench::allocate(const std::vector<size_t> &totals) {
    const size_t max_total = *std::max_element(totals.begin(), totals.end());
    send_buf_ = std::make_unique<GuardedBuffer>(std::max<size_t>(shape(max_total, false).send_elems() * elem_, elem_));
    recv_buf_ = std::make_unique<GuardedBuffer>(std::max<size_t>(max_total * elem_, elem_));
}

void Bench::list_candidates() {
    for (int i = 0; i < nnpccl_algorithm_count(); ++i) {
        nnpccl_algorithm_info_t a;
        if (nnpccl_result_t rc = nnpccl_algorithm_get(i, &a); rc != NNPCCL_SUCCESS) fail("the algorithm registry", rc);
        if ((a.serves & (1u << static_cast<unsigned>(o_.coll->coll))) == 0) continue;
        candidates_.push_back({a.name, std::string(o_.coll->name) + ":" + a.name});
    }
}

// Sets comm_ up for turn k (its forced algorithm, or the selector) and returns it.
nnpccl_comm_t Bench::comm_for_turn(size_t k) {
    const bool selector = k == candidates_.size(); // the communicator's own rules
    if (nnpccl_result_t rc = nnpccl_comm_set_algorithms(comm_, selector ? nullptr : candidates_[k].rules.c_str());
        rc != NNPCCL_SUCCESS)
        fail("forcing an algorithm", rc);
    return comm_;
}

void Bench::print_compare_header() {
    std::printf("# ccl-bench %s --compare %d: nnpccl %d.%d.%d, %d ranks, out of place, %s %s; per size %d "
                "rounds of -n %d calls of each, taking turns; median time per call (us)\n",
                o_.coll->name, o_.compare_rounds, NNPCCL_MAJOR, NNPCCL_MINOR, NNPCCL_PATCH, nranks_,
                nnpccl_datatype_name(o_.dt), nnpccl_check::reduces(o_.coll->coll) ? nnpccl_redop_name(o_.op) : "",
                o_.compare_rounds, o_.iters);
    std::printf("# selector: the selector's own choice, run unforced; ratio: the choice forced over the "
                "fastest forced\n#%11s",
                "size");
    for (const Candidate &c : candidates_)
        std::printf("  %*s", static_cast<int>(std::max<size_t>(9, c.name.size())), c.name.c_str());
    std::printf("  %9s  %-20s  %-20s  %5s  %6s\n", "selector", "choice", "fastest", "ratio", "#wrong");
}

// A forced algorithm that does not apply fails the call, on every rank
// alike (the plan depends on no rank), and leaves the communicator usable;
// except in a call of no elements, which the model plans whatever is forced.
std::vector<bool> Bench::applying_turns(const nnpccl_check::CallShape &sh, const void *send, void *recv) {
    const size_t selector = candidates_.size();
    std::vector<bool> applies(selector + 1, true);
    for (size_t k = 0; k < selector; ++k) {
        const nnpccl_result_t rc = call(comm_for_turn(k), send, recv, sh);
        size_t left = 0;
        if (rc == NNPCCL_ERR_INVALID_USAGE)
            applies[k] = false;
        else if (rc != NNPCCL_SUCCESS)
            fail(o_.coll->name, rc);
        else
            applies[k] = next_algorithm(comm_, describe_call(sh, send, recv), &left) == candidates_[k].name;
    }
    return applies;
}

void Bench::compare_size(size_t total, CompareTally *tally) {
    const size_t selector = candidates_.size();
    const nnpccl_check::CallShape sh = shape(total, false);
    const void *send = nullptr;
    void *recv = nullptr;
    prepare(sh, &send, &recv);
    const std::vector<bool> applies = applying_turns(sh, send, recv);
    std::vector<std::vector<double>> times(selector + 1);
    for (int round = 0; round < o_.compare_rounds; ++round)
        for (size_t turn = 0; turn <= selector; ++turn) {
            const size_t k = (turn + static_cast<size_t>(round)) % (selector + 1);
            if (applies[k])
                times[k].push_back(time_calls(comm_for_turn(k), send, recv, sh, round == 0 ? o_.warmup : 0, o_.iters));
        }
    uint64_t row_wrong = 0; // over every algorithm
    if (o_.check)
        for (size_t k = 0; k <= selector; ++k) {
            if (!applies[k]) continue;
            Result checked;
            check(comm_for_turn(k), sh, &checked);
            row_wrong += checked.wrong;
            tally->out_of_bounds += checked.out_of_bounds;
        }
    tally->wrong += row_wrong;
    // Rank 0 prints; the choice is the same on every rank.
    if (rank_ == 0) print_compare_row(total, describe_call(sh, send, recv), applies, times, row_wrong, tally);
}

void Bench::print_compare_row(size_t total, const nnpccl_call_t &call, const std::vector<bool> &applies,
                              std::vector<std::vector<double>> &times, uint64_t row_wrong, CompareTally *tally) {
    const size_t selector = candidates_.size();
    // The selector's choice: the tuner's decision, made in its first turn,
    // or the model's where the tuner had nothing to measure.
    comm_for_turn(selector);
    size_t left = 0;
    const std::string chosen = next_algorithm(comm_, call, &left);
    std::vector<double> medians(selector + 1, 0);
    size_t fastest = selector, choice = selector;
    for (size_t k = 0; k <= selector; ++k) {
        if (!applies[k]) continue;
        std::vector<double> &t = times[k];
        std::sort(t.begin(), t.end());
        medians[k] = t.size() % 2 != 0 ? t[t.size() / 2] : (t[t.size() / 2 - 1] + t[t.size() / 2]) / 2;
        if (k < selector && (fastest == selector || medians[k] < medians[fastest])) fastest = k;
        if (k < selector && candidates_[k].name == chosen) choice = k;
    }
    // A call of no bytes (a blockwise collective's smallest sizes round
    // down to empty blocks) moves nothing whichever algorithm plans it:
    // its times differ only by the noise of an empty call.
    const bool judged = total != 0 && choice != selector && fastest != selector;
    if (total != 0 && fastest != selector) tally->winners.emplace_back(total * elem_, candidates_[fastest].name);
    const double ratio = judged ? medians[choice] / medians[fastest] : 0;
    tally->misses += ratio > 1.10;
    tally->judged_sizes += judged;
    std::printf("%12zu", total * elem_);
    for (size_t k = 0; k <= selector; ++k) {
        const int width = k == selector ? 9 : static_cast<int>(std::max<size_t>(9, candidates_[k].name.size()));
        std::printf("  %*s", width, applies[k] ? fmt_num(medians[k], width).c_str() : "n/a");
    }
    char ratio_text[16] = "-";
    if (judged) std::snprintf(ratio_text, sizeof ratio_text, "%.2f", ratio);
    std::printf("  %-20s  %-20s  %5s  %6s%s\n", chosen.empty() ? "-" : chosen.c_str(),
                fastest == selector ? "-" : candidates_[fastest].name.c_str(), ratio_text,
                o_.check ? std::to_string(row_wrong).c_str() : "N/A", ratio > 1.10 ? "  miss" : "");
    std::fflush(stdout);
}

// --tune: the fastest per size into the tuning file; the exit status.
int Bench::write_tune(size_t largest_total, const std::vector<std::pair<size_t, std::string>> &winners) {
    // The topology's name as the library gives it, which the file must match.
    nnpccl_explanation_t e{};
    std::vector<nnpccl_prediction_t> predictions(static_cast<size_t>(nnpccl_algorithm_count()));
    int predicted = 0;
    const nnpccl_call_t c = describe_call(shape(largest_total, false), nullptr, nullptr);
    const char *topo = std::getenv("NNPCCL_TOPO");
    std::string error;
    if (nnpccl_explain(topo != nullptr ? topo : "", nranks_, &c, predictions.data(),
                       static_cast<int>(predictions.size()), &predicted, &e) != NNPCCL_SUCCESS) {
        error = std::string("naming the topology: ") + nnpccl_get_last_error(nullptr);
    } else if (write_tuning_file(o_.tune_path, o_.coll->name, nranks_, e.topology, winners,
                                 "ccl-bench --compare " + std::to_string(o_.compare_rounds) + " -n " +
                                     std::to_string(o_.iters) + ", " + nnpccl_datatype_name(o_.dt),
                                 &error)) {
        std::printf("# wrote the fastest algorithm per size to %s (NNPCCL_TUNING_FILE)\n", o_.tune_path.c_str());
    }
    std::fflush(stdout);
    if (error.empty()) return 0;
    std::fprintf(stderr, "ccl-bench: --tune %s: %s\n", o_.tune_path.c_str(), error.c_str());
    return 1;
}

// Every algorithm serving the collective, forced, and the selector's own
// choice. Per size each takes its turn for -n calls, R rounds, a different
// one first each round: a machine whose speed drifts then slows them alike,
// where separate runs would compare one machine state against another. All
// take their turns on comm_ itself, its forced algorithms swapped between
// turns (nnpccl_comm_set_algorithms): communicators of their own would
// compare creation order too, as a communicator made later can run the
// same algorithm slower than the first.
int Bench::compare() {
    list_candidates();
    const std::vector<size_t> totals = sizes();
    allocate(totals);
    if (rank_ == 0) print_compare_header();
    CompareTally tally;
    for (size_t total : totals) compare_size(total, &tally);
    if (rank_ == 0) {
        std::printf("# the choice is more than 10%% slower than the fastest forced algorithm at %d of %d sizes\n",
                    tally.misses, tally.judged_sizes);
        std::printf("# Out of bounds values : %" PRIu64 " %s\n", tally.out_of_bounds,
                    tally.out_of_bounds == 0 ? "OK" : "FAILED");
        if (tally.wrong != 0) std::printf("# %" PRIu64 " wrong values: FAILED\n", tally.wrong);
        std::fflush(stdout);
    }
    const int tune_status = !o_.tune_path.empty() && rank_ == 0 ? write_tune(totals.back(), tally.winners) : 0;
    comm_for_turn(candidates_.size());
    return (tally.wrong != 0 || tally.out_of_bounds != 0) ? 1 : tune_status;
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
                    o_.sizes.min_bytes, o_.sizes.max_bytes,
                    o_.sizes.step_bytes != 0 ? o_.sizes.step_bytes : o_.sizes.step_factor,
                    o_.sizes.step_bytes != 0 ? "bytes" : "factor", o_.warmup, o_.iters, o_.check);
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
        const int root = nnpccl_check::has_root(o_.coll->coll) ? o_.root : -1;
        const char *opname = nnpccl_check::reduces(o_.coll->coll) ? nnpccl_redop_name(o_.op) : "none";
        std::printf("%12zu  %12zu  %8s  %6s  %6d", total * elem_, total, nnpccl_datatype_name(o_.dt), opname, root);
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
                         total * elem_, total, nnpccl_datatype_name(o_.dt), opname, root);
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

} // namespace

int run_sweep(const Options &o, nnpccl_comm_t comm, int rank, int nranks) { return Bench(o, comm, rank, nranks).run(); }

int run_compare(const Options &o, nnpccl_comm_t comm, int rank, int nranks) {
    return Bench(o, comm, rank, nranks).compare();
}

} // namespace nnpccl_bench
