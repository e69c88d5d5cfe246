#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ccl_sim.hpp"
#include "cost_terms.hpp"
#include "dtype.hpp"
#include "number_format.hpp"
#include "topology_drawing.hpp"

namespace nnpccl::sim {

namespace {

constexpr int kNameWidth = 20;

using nnpccl_tools::table_number;

// GB/s of `bytes` in `us` (1 GB/s = 1e3 bytes per µs).
double gbps(double bytes, double us) { return us > 0 ? bytes / (us * 1e3) : 0; }

// A message size as "512K", "64M" or bytes.
std::string chunk_text(size_t bytes) {
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "M";
    if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "K";
    return std::to_string(bytes);
}

std::string time_text(const Cell &cell) {
    return table_number(cell.sim.result.time_us, 9) + (cell.sim.extrapolated ? "~" : " ");
}

// The model's time, marked where it is more than kDisagreement from the simulation.
std::string model_text(const Cell &cell, int width) {
    const double t = cell.sim.result.time_us;
    const bool off = t > 0 ? std::fabs(cell.model_us - t) > kDisagreement * t : cell.model_us > 0;
    return table_number(cell.model_us, width - 1) + (off ? "!" : " ");
}

// Utilisation from pale (idle) through yellow to red (busy all along).
std::string utilisation_colour(double u) {
    u = std::clamp(u, 0.0, 1.0);
    const double stops[3][3] = {{205, 214, 224}, {240, 180, 0}, {190, 0, 0}};
    const int k = u < 0.5 ? 0 : 1;
    const double f = u < 0.5 ? u / 0.5 : (u - 0.5) / 0.5;
    char buf[16];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x",
                  static_cast<int>(std::lround(stops[k][0] + f * (stops[k + 1][0] - stops[k][0]))),
                  static_cast<int>(std::lround(stops[k][1] + f * (stops[k + 1][1] - stops[k][1]))),
                  static_cast<int>(std::lround(stops[k][2] + f * (stops[k + 1][2] - stops[k][2]))));
    return buf;
}

Status write_svg(const std::string &path, const Network &network, const Cell &cell, const std::string &what) {
    const Topology &t = network.topology();
    const std::vector<Link> &links = t.machine().links();
    const SimResult &r = cell.sim.result;
    nnpccl_tools::LinkOverlay overlay;
    double busiest = 0, sum = 0;
    size_t busiest_link = 0;
    for (size_t l = 0; l < links.size(); ++l) {
        const double u = r.time_us > 0 ? r.busy_us[l] / r.time_us : 0;
        if (u > busiest) {
            busiest = u;
            busiest_link = l;
        }
        sum += u;
        char tip[160];
        std::snprintf(tip, sizeof tip, "chip %d -> chip %d: %.1f%% busy (%.6g of %.6g us), %g GB/s, %g us",
                      links[l].from, links[l].to, 100 * u, r.busy_us[l], r.time_us, links[l].gbps, links[l].latency_us);
        overlay.colour.push_back(u > 0 ? utilisation_colour(u) : "");
        overlay.tooltip.push_back(tip);
    }
    char line[256];
    overlay.legend.push_back({"", what});
    std::snprintf(line, sizeof line, "link utilisation: busy time over the collective's %.6g us (virtual)%s", r.time_us,
                  cell.sim.extrapolated ? ", extrapolated" : "");
    overlay.legend.push_back({"", line});
    if (!links.empty()) {
        std::snprintf(line, sizeof line, "mean %.1f%%; busiest chip %d -> chip %d, %.1f%%",
                      100 * sum / static_cast<double>(links.size()), links[busiest_link].from, links[busiest_link].to,
                      100 * busiest);
        overlay.legend.push_back({"", line});
    }
    for (int pct : {0, 25, 50, 75, 100})
        overlay.legend.push_back(
            {utilisation_colour(pct / 100.0), std::to_string(pct) + "%" + (pct == 0 ? " (grey: idle)" : "")});
    std::ofstream out(path, std::ios::binary);
    out << nnpccl_tools::render_svg(t, &overlay);
    out.close();
    if (!out) return system_error("--svg %s: cannot write it", path.c_str());
    return Status::ok();
}

// The table's two heading lines.
void print_column_heads(const Run &run) {
    if (run.o.all_algos) {
        std::printf("#       size         count");
        for (const AlgorithmInfo *a : run.candidates) std::printf("  %-29s", a->name);
        std::printf("  %-18s  %-20s  %-20s  %s\n", "bound", "model's choice", "fastest simulated", "its chunk");
        std::printf("#        (B)    (elements)");
        for (size_t i = 0; i < run.candidates.size(); ++i) std::printf("  %10s %7s %10s", "time", "busbw", "model");
        std::printf("  %10s %7s  %-20s  %-20s  %s\n", "time", "busbw", "", "", "(B)");
    } else {
        std::printf("#       size         count      type   redop    root  %-*s  %10s  %7s  %7s  %10s  %9s  %10s  "
                    "%7s  %s\n",
                    kNameWidth, "algorithm", "time", "algbw", "busbw", "model", "sim/model", "bound", "busbw", "chunk");
        std::printf("#        (B)    (elements)                            %-*s  %10s  %7s  %7s  %10s  %9s  %10s  "
                    "%7s  %s\n",
                    kNameWidth, "", "(us)", "(GB/s)", "(GB/s)", "(us)", "", "(us)", "(GB/s)", "(B)");
    }
}

} // namespace

std::string extrapolation_note(const Cell &c, size_t bytes) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "# ~ %s at %zu B: about %.3g link crossings; extrapolated from the call cut to %zu and to %zu "
                  "elements, at the pace of the last %zu (the first %zu's %.1f%% off it)\n",
                  c.algorithm->name, bytes, static_cast<double>(c.sim.estimated_hops), c.sim.counts[0], c.sim.counts[1],
                  c.sim.counts[1] - c.sim.counts[0], c.sim.counts[0], 100 * c.sim.slope_spread);
    return buf;
}

// As src/executor.cpp's describe() names it: "allreduce #1 (count 6, float,
// sum)"; every simulated call is the first.
TraceOperation operation(const Options &o, const SimCall &call, int rank, int op, int nranks) {
    const Collective c = call.what.exchange ? (op == 0 ? Collective::Send : Collective::Recv) : call.what.collective;
    const CollectiveArgs args = collective_args(call, rank, nranks);
    TraceOperation t;
    t.short_name = std::string(collective_name(c)) + " #1";
    t.name = t.short_name + " (count " + std::to_string(args.count);
    // As the runtime describes a call: a barrier's datatype is uint8, and a
    // collective that reduces nothing carries sum.
    t.name += std::string(", ") + datatype_name(c == Collective::Barrier ? NNPCCL_UINT8 : o.datatype);
    t.name += std::string(", ") + redop_name(reduces(c) ? o.op : NNPCCL_SUM);
    if (c == Collective::Send) {
        const std::string to = " to rank " + std::to_string((rank + 1) % nranks);
        t.name += "," + to;
        t.short_name += to;
    } else if (c == Collective::Recv) {
        const std::string from = " from rank " + std::to_string((rank + nranks - 1) % nranks);
        t.name += "," + from;
        t.short_name += from;
    } else if (has_root(c)) {
        t.name += ", root " + std::to_string(call.root);
    }
    t.name += ")";
    t.bytes = call_bytes(args);
    return t;
}

void print_header(const Run &run) {
    const Options &o = run.o;
    const Topology &topology = run.topology;
    std::printf("# ccl-sim %s: simulated on %s, %d ranks, %s (%zu B), chunk %zu B, %s; virtual time, no ranks "
                "run\n",
                o.collective.c_str(), topology.name().c_str(), run.p, datatype_name(o.datatype), run.call.elem_size,
                run.call.chunk_bytes,
                run.options.slots > 0 ? (std::to_string(run.options.slots) + " slots per stream").c_str()
                                      : "unlimited slots per stream");
    std::printf("# links: FIFO servers at their bandwidth and latency, cut-through along each route; reduction "
                "%.3g ns/B per chip%s%s\n",
                run.options.reduce_us_per_byte * 1e3,
                topology.machine().shape() == Shape::Flat ? " (the host's, added to its transfers)" : " (NNP-T HBM)",
                run.forced != nullptr ? ""
                : !o.all_algos        ? "; the algorithm: the selector's choice"
                                      : "");
    if (topology.machine().shape() == Shape::Flat && run.planning.inputs.costs.host_ranks_per_core > 1)
        std::printf("# the model counts %.3g ranks per core on this host (its lockstep factor); the simulation gives "
                    "every rank a core\n",
                    run.planning.inputs.costs.host_ranks_per_core);
    if (!run.what_if_summary.empty()) std::printf("# what if: %s\n", run.what_if_summary.c_str());
    if (!run.fidelity_note.empty())
        std::printf("# %s (the model knows neither: sim/model shows what they cost)\n", run.fidelity_note.c_str());
    std::printf("# time in us, algbw and busbw in GB/s; model: the cost model's prediction (ccl-bench --explain); "
                "bound: the bus bytes at the slowest chip's injection, %g GB/s\n",
                topology.min_injection_gbps());
    std::printf("# ~ marks a time extrapolated from smaller calls (--max-hops); ! marks a model more than %.0f%% "
                "from the simulation\n",
                100 * kDisagreement);
    print_column_heads(run);
}

void print_row_of_all(const Run &run, const RowFigures &row, const std::vector<Cell> &cells,
                      const AlgorithmInfo *choice, size_t choice_chunk_bytes) {
    std::printf("%12zu  %12zu", row.bytes, run.call.count);
    const Cell *fastest = nullptr;
    for (const Cell &cell : cells) {
        if (!cell.simulated) {
            std::printf("  %10s %7s %10s", cell.applies ? "failed" : "n/a", "", "");
            continue;
        }
        const double t = cell.sim.result.time_us;
        std::printf("  %s %s %s", time_text(cell).c_str(), table_number(gbps(row.total, t) * row.bus, 7).c_str(),
                    model_text(cell, 10).c_str());
        if (fastest == nullptr || t < fastest->sim.result.time_us) fastest = &cell;
    }
    std::printf("  %10s %7s  %-20s  %-20s  %s\n", table_number(row.bound, 10).c_str(),
                table_number(gbps(row.total, row.bound) * row.bus, 7).c_str(),
                choice != nullptr ? choice->name : "none", fastest != nullptr ? fastest->algorithm->name : "-",
                choice != nullptr ? chunk_text(choice_chunk_bytes).c_str() : "-");
}

void print_row_of_one(const Run &run, const Network &network, const RowFigures &row, const Cell &cell, Totals *totals) {
    const Options &o = run.o;
    const char *op = reduces(run.c) ? redop_name(o.op) : "none";
    std::printf("%12zu  %12zu  %8s  %6s  %6d  %-*s", row.bytes, run.call.count, datatype_name(o.datatype), op,
                has_root(run.c) ? o.root : -1, kNameWidth, cell.algorithm->name);
    if (!cell.simulated) {
        std::printf("  %10s\n", "failed");
        return;
    }
    const double t = cell.sim.result.time_us;
    char ratio[16];
    std::snprintf(ratio, sizeof ratio, "%.2f", cell.model_us > 0 ? t / cell.model_us : 0.0);
    std::printf("  %s  %s  %s  %s  %9s  %s  %s  %s\n", time_text(cell).c_str(),
                table_number(gbps(row.total, t), 7).c_str(), table_number(gbps(row.total, t) * row.bus, 7).c_str(),
                model_text(cell, 10).c_str(), ratio, table_number(row.bound, 10).c_str(),
                table_number(gbps(row.total, row.bound) * row.bus, 7).c_str(), chunk_text(cell.chunk_bytes).c_str());
    if (o.svg_path.empty()) return;
    const std::string label = std::string(cell.algorithm->name) + " " + o.collective + " of " +
                              std::to_string(row.bytes) + " B on " + std::to_string(run.p) + " ranks";
    if (Status s = write_svg(o.svg_path, network, cell, label); !s) {
        std::fprintf(stderr, "ccl-sim: %s\n", s.message().c_str());
        totals->status = 1;
    }
}

void print_footer(const Run &run, const Totals &totals, double seconds) {
    for (const std::string &n : totals.notes) std::fputs(n.c_str(), stdout);
    std::vector<std::pair<std::string, std::string>> not_applying = totals.not_applying;
    std::sort(not_applying.begin(), not_applying.end());
    not_applying.erase(std::unique(not_applying.begin(), not_applying.end()), not_applying.end());
    for (const auto &[name, why] : not_applying) std::printf("# %s does not apply: %s\n", name.c_str(), why.c_str());
    for (const auto &[name, bytes] : totals.own_chunk)
        std::printf("# %s runs in the model's chunk, below --chunk at some sizes: messages of at most %zu B\n",
                    name.c_str(), bytes);
    if (!run.o.trace_path.empty() && totals.status == 0)
        std::printf("# trace: %s, %llu step events (one per step)\n", run.o.trace_path.c_str(),
                    static_cast<unsigned long long>(totals.steps));
    if (!run.o.svg_path.empty() && totals.status == 0)
        std::printf("# link utilisation drawn to %s\n", run.o.svg_path.c_str());
    std::printf("# simulated %llu steps, %llu messages, %llu link crossings in %.1f s\n",
                static_cast<unsigned long long>(totals.steps), static_cast<unsigned long long>(totals.messages),
                static_cast<unsigned long long>(totals.hops), seconds);
}

} // namespace nnpccl::sim
