// A peer bench's report, in nccl-tests's (and ccl-bench's) format: the
// header, a row per size with an out-of-place and an in-place group, and
// the footer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "number_format.hpp"
#include "peer_check.hpp"
#include "peer_options.hpp"

namespace peer_bench {

// nccl-tests's numbers with three decimals below 1, as ccl-bench prints them.
inline std::string fitted(double v, int width) { return nnpccl_tools::table_number(v, width, 3); }

// Prints on one rank only (construct with printing = rank == 0); every rank
// calls the same methods so the code reads the same everywhere.
class Report {
public:
    explicit Report(bool printing) : printing_(printing) {}

    void begin(const std::string &tool_line, const Options &opts) {
        if (!printing_) return;
        std::printf("# %s\n", tool_line.c_str());
        std::printf("# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
                    "validation: %d\n",
                    opts.min_bytes, opts.max_bytes, opts.step_factor > 1 ? opts.step_factor : opts.step_bytes,
                    opts.step_factor > 1 ? "factor" : "bytes", opts.warmup_iters, opts.iters, opts.check ? 1 : 0);
        std::printf("#\n");
        std::printf("#                                                              out-of-place"
                    "                       in-place\n");
        std::printf("#       size         count      type   redop    root"
                    "     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n");
        std::printf("#        (B)    (elements)                          "
                    "     (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n");
        std::fflush(stdout);
    }

    void begin_row(const Case &c) {
        const CollectiveInfo &coll = info(c.collective);
        if (printing_)
            std::printf("%12zu  %12zu  %8s  %6s  %6i", c.layout.total_bytes, c.layout.total_count, info(c.dtype).name,
                        coll.reduces ? name(c.op) : "none", coll.rooted ? c.root : -1);
    }

    // seconds: average time of one call (the slowest rank's); wrong: summed
    // over ranks; checked: whether wrong means anything (-c 1).
    void group(const Case &c, double seconds, uint64_t wrong, bool checked) {
        const double algbw = seconds > 0 ? static_cast<double>(c.layout.total_bytes) / 1.0e9 / seconds : 0.0;
        const double busbw = algbw * bus_factor(c.collective, c.nranks);
        busbw_sum_ += busbw;
        ++groups_;
        wrong_total_ += wrong;
        if (!printing_) return;
        std::printf("  %7s  %6s  %6s", fitted(seconds * 1.0e6, 7).c_str(), fitted(algbw, 6).c_str(),
                    fitted(busbw, 6).c_str());
        if (checked)
            std::printf("  %6g", static_cast<double>(wrong));
        else
            std::printf("  %6s", "N/A");
    }

    void end_row() {
        if (printing_) {
            std::printf("\n");
            std::fflush(stdout);
        }
    }

    // Prints the footer; returns the process exit status.
    int finish() {
        if (printing_) {
            std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(wrong_total_),
                        wrong_total_ == 0 ? "OK" : "FAILED");
            std::printf("# Avg bus bandwidth    : %g\n", groups_ > 0 ? busbw_sum_ / groups_ : 0.0);
            std::printf("#\n");
            std::fflush(stdout);
        }
        return wrong_total_ == 0 ? 0 : 1;
    }

private:
    bool printing_;
    double busbw_sum_ = 0;
    int groups_ = 0;
    uint64_t wrong_total_ = 0;
};

} // namespace peer_bench
