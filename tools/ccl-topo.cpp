// ccl-topo: shows the host (hwloc) and the simulated machine nnpccl plans
// on — chips, ICL links, placement, the rings and trees found, and the
// allreduce lower bound — and draws it (--svg, --dot) or dumps it as a
// topology file (--json). Run `ccl-topo --help`.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command_line.hpp"
#include "host.hpp"
#include "presets.hpp"
#include "topo_file.hpp"
#include "topology.hpp"
#include "topology_drawing.hpp"

namespace {

struct Options {
    std::string topo = "flat";
    int np = 0;
    size_t size = 1 << 20;
    double icl_latency_us = 1.0;
    std::string svg_path;
    bool dot = false;
    bool json = false;
    bool no_host = false;
};

// Usage errors and malformed input: one line on stderr, exit status 2.
[[noreturn]] void usage_error(const std::string &message) { nnpccl_tools::exit_usage("ccl-topo", message, ""); }

// Unlike nnpccl::parse_size, ccl-topo has always taken fractions ("1.5M")
// and a lower-case k.
bool parse_size(const std::string &text, size_t *out) {
    char *end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || !(v >= 0)) return false;
    std::string suffix(end);
    double scale = suffix.empty() ? 1 : suffix == "K" || suffix == "k" ? 1024.0 : suffix == "M" ? 1048576.0
                                     : suffix == "G"                   ? 1073741824.0
                                                                       : -1;
    if (scale < 0 || v * scale > 1e18) return false;
    *out = static_cast<size_t>(v * scale);
    return true;
}

Options parse_args(int argc, char **argv) {
    Options o;
    CLI::App app{"Shows the host and the machine nnpccl plans on: chips, links, placement, rings, trees and\n"
                 "the allreduce lower bound; draws it (--svg, --dot) or prints it as a topology file (--json).\n",
                 "ccl-topo"};
    app.footer("presets:\n" + nnpccl::describe_presets());
    nnpccl_tools::house_style(app, 24);

    app.add_option("--topo", o.topo, "the machine: a preset or a JSON topology file (default: flat)")
        ->type_name("NAME|FILE");
    app.add_option("--np", o.np, "ranks to place on it (default: one per chip; flat: this host's cores)")
        ->transform(CLI::Validator(
            [](std::string &text) {
                // Decimal only: CLI11 alone would read "010" as octal.
                long n = 0;
                if (!nnpccl_tools::read_decimal(text.c_str(), 1, 1 << 20, &n))
                    return "needs a positive rank count, got '" + text + "'";
                text = std::to_string(n);
                return std::string();
            },
            ""))
        ->type_name("N");
    app.add_option_function<std::string>(
           "--size", [&o](const std::string &text) { parse_size(text, &o.size); },
           "message size for the allreduce lower bound, K/M/G suffixes (default 1M)")
        ->check(CLI::Validator(
            [](std::string &text) {
                size_t bytes = 0;
                return parse_size(text, &bytes) ? std::string()
                                                : "needs a byte count such as 1048576 or 64M, got '" + text + "'";
            },
            ""))
        ->type_name("BYTES");
    app.add_option("--icl-latency", o.icl_latency_us, "ICL latency per hop in microseconds (default 1)")
        ->check(CLI::Validator(
            [](std::string &text) {
                char *end = nullptr;
                double us = std::strtod(text.c_str(), &end);
                return !text.empty() && *end == '\0' && us >= 0 ? std::string()
                                                                 : "needs microseconds >= 0, got '" + text + "'";
            },
            ""))
        ->type_name("US");
    app.add_option("--svg", o.svg_path, "also draw the machine and its rings to FILE")->type_name("FILE");
    CLI::Option *dot = app.add_flag("--dot", o.dot, "print a Graphviz graph instead of the summary");
    CLI::Option *json = app.add_flag("--json", o.json, "print the machine as a topology file instead of the summary");
    app.add_flag("--no-host", o.no_host, "leave out the host summary");
    // Both replace the summary; which one was meant is not ours to guess.
    dot->excludes(json);
    for (CLI::Option *flag : {dot, json, app.get_option("--no-host")}) flag->disable_flag_override();

    nnpccl_tools::Usage("ccl-topo", "--help").parse(app, argc, argv);
    return o;
}

std::string num(double v) {
    if (std::isinf(v)) return "unlimited";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

std::string plural(long n, const char *word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

std::string rank_list(const std::vector<int> &ranks, size_t shown = 32) {
    std::string out;
    for (size_t i = 0; i < ranks.size() && i < shown; ++i)
        out += (i ? " " : "") + std::to_string(ranks[i]);
    if (ranks.size() > shown)
        out += " ... " + std::to_string(ranks.back()) + " (" + std::to_string(ranks.size()) + " ranks)";
    return out;
}

std::string range_text(double lo, double hi, const char *unit) {
    return lo == hi ? num(lo) + " " + unit : num(lo) + "-" + num(hi) + " " + unit;
}

const char *shape_words(nnpccl::Shape s) {
    switch (s) {
    case nnpccl::Shape::Ring: return "ring";
    case nnpccl::Shape::FullyConnected: return "fully connected";
    case nnpccl::Shape::HybridCubeMesh: return "hybrid cube mesh";
    case nnpccl::Shape::Torus: return "2D torus";
    case nnpccl::Shape::Flat: return "flat (host model: every pair linked)";
    case nnpccl::Shape::Graph: break;
    }
    return "graph";
}

std::string tree_text(const nnpccl::TreeEmbedding &t, int nranks) {
    return "root " + std::to_string(t.root) + ", depth " + std::to_string(t.depth) + ", " +
           std::to_string(t.edges_on_links) + " of " + std::to_string(std::max(0, nranks - 1)) +
           " edges on links, slowest edge " + num(t.bottleneck_gbps) + " GB/s / " + num(t.hop_latency_us) + " us";
}

void print_topology(const nnpccl::Topology &t, const Options &o) {
    const nnpccl::Machine &m = t.machine();
    std::printf("topology %s: %s\n", t.name().c_str(),
                t.spans_hosts() ? "hosts (the host model within each host, a network between them)"
                                : shape_words(m.shape()));
    if (m.shape() == nnpccl::Shape::Torus)
        std::printf("  torus: %dx%d, wrap-around in both dimensions\n", m.torus().x, m.torus().y);
    if (t.spans_hosts()) {
        // The two levels: each host's ranks, and the network link they share.
        std::printf("  hosts: %zu, joined by a switch, each by one link of %s GB/s per direction (its ranks share "
                    "it)\n",
                    t.host_groups().size(), num(t.network_gbps()).c_str());
        for (const std::vector<int> &group : t.host_groups())
            std::printf("    %s: ranks %s\n", m.chip(t.chip_of(group[0])).host.c_str(), rank_list(group).c_str());
    }
    double bw_lo = 1e300, bw_hi = 0, lat_lo = 1e300, lat_hi = 0;
    for (const nnpccl::Link &l : m.links()) {
        bw_lo = std::min(bw_lo, l.gbps);
        bw_hi = std::max(bw_hi, l.gbps);
        lat_lo = std::min(lat_lo, l.latency_us);
        lat_hi = std::max(lat_hi, l.latency_us);
    }
    std::printf("  chips: %d, links: %d bidirectional, %d one-way", m.num_chips(), m.bidirectional_link_count(),
                m.one_way_link_count());
    if (!m.links().empty())
        std::printf(" (%s, %s per direction)", range_text(bw_lo, bw_hi, "GB/s").c_str(),
                    range_text(lat_lo, lat_hi, "us").c_str());
    int ports_used = 0, ports = 0;
    for (int c = 0; c < m.num_chips(); ++c) {
        ports_used = std::max(ports_used, m.ports_used(c));
        ports = std::max(ports, m.chip(c).ports);
    }
    std::printf("\n  ports: at most %d used per chip, of %d\n", ports_used, ports);

    bool in_order = true;
    for (int r = 0; r < t.nranks(); ++r) in_order = in_order && t.chip_of(r) == r;
    if (in_order && t.nranks() == 1)
        std::printf("  placement: 1 rank, on chip 0\n");
    else if (in_order)
        std::printf("  placement: %s on chips 0-%d, rank r on chip r\n", plural(t.nranks(), "rank").c_str(),
                    t.nranks() - 1);
    else
        std::printf("  placement: %s on chips %s (rank r on the r-th)\n", plural(t.nranks(), "rank").c_str(),
                    rank_list(t.placement()).c_str());
    if (const nnpccl::RankGrid *g = t.torus())
        std::printf("  rank grid: %dx%d%s%s; dimension rings: %d along x, %d along y\n", g->x, g->y,
                    g->wrap_x ? ", rows wrap" : "", g->wrap_y ? ", columns wrap" : "", g->y, g->x);

    const int ham = t.hamiltonian_ring_count();
    const size_t rings = t.rings().size(), channels = t.ring_channels().size();
    const char *ways = channels <= rings ? "one way: backward would add no bandwidth"
                       : rings > 1       ? "each ring both ways"
                                         : "both ways";
    if (ham > 1)
        std::printf("  rings: %d edge-disjoint Hamiltonian rings (%zu channels: %s)\n", ham, channels, ways);
    else if (ham == 1)
        std::printf("  rings: 1 Hamiltonian ring (%zu channel%s: %s)\n", channels, channels == 1 ? "" : "s",
                    t.nranks() <= 2 ? "one link both ways" : ways);
    else
        std::printf("  rings: no Hamiltonian ring over links among the placed chips; 1 routed ring\n");
    for (size_t r = 0; r < rings; ++r) {
        const nnpccl::RingEmbedding &e = t.ring_embeddings()[r];
        std::printf("    ring %zu: %s  [%s GB/s, %s us per hop%s]\n", r, rank_list(e.ranks).c_str(),
                    num(e.bottleneck_gbps).c_str(), num(e.hop_latency_us).c_str(), e.on_links ? "" : ", routed");
    }
    std::printf("  spanning tree (BFS over links): %s\n", tree_text(t.spanning_tree(), t.nranks()).c_str());
    for (int w = 0; w < 2; ++w)
        std::printf("  double binary tree %d: %s\n", w, tree_text(t.double_binary_tree(w), t.nranks()).c_str());
    std::printf("  allreduce lower bound for %zu bytes: %s us (2(p-1)/p * n / B, B = %s GB/s per chip)\n", o.size,
                num(t.allreduce_lower_bound_us(o.size)).c_str(), num(t.min_injection_gbps()).c_str());
}

} // namespace

int main(int argc, char **argv) {
    Options o = parse_args(argc, argv);

    nnpccl::HostInfo host;
    const nnpccl::Status host_found = nnpccl::discover_host(&host);
    const bool have_host = host_found.is_ok();
    int nranks = o.np;
    if (nranks == 0 && (o.topo == "flat" || o.topo.empty())) nranks = have_host ? host.cores : 1;

    nnpccl::TopologyOptions topo_options;
    topo_options.icl.latency_us = o.icl_latency_us;
    nnpccl::Topology topology;
    if (const nnpccl::Status loaded = nnpccl::load_topology(o.topo, nranks, topo_options, &topology); !loaded)
        usage_error(loaded.message());

    if (!o.svg_path.empty()) {
        std::ofstream svg(o.svg_path, std::ios::binary);
        svg << nnpccl_tools::render_svg(topology);
        svg.close();
        if (!svg) {
            std::fprintf(stderr, "ccl-topo: cannot write %s\n", o.svg_path.c_str());
            return 1;
        }
    }
    if (o.dot) {
        std::fputs(nnpccl_tools::render_dot(topology).c_str(), stdout);
        return 0;
    }
    if (o.json) {
        bool every_chip_in_order = topology.nranks() == topology.machine().num_chips();
        for (int r = 0; every_chip_in_order && r < topology.nranks(); ++r)
            every_chip_in_order = topology.chip_of(r) == r;
        std::fputs(nnpccl::topology_to_json(topology.machine(),
                                            every_chip_in_order ? std::vector<int>{} : topology.placement())
                       .c_str(),
                   stdout);
        return 0;
    }
    if (!o.no_host) {
        if (have_host)
            std::fputs(nnpccl::describe_host(host).c_str(), stdout);
        else
            std::printf("host: unknown (%s)\n", host_found.message().c_str());
        std::printf("\n");
    }
    print_topology(topology, o);
    if (!o.svg_path.empty()) std::printf("  drawing: %s\n", o.svg_path.c_str());
    return 0;
}
