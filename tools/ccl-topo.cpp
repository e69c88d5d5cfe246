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

#include "ccl-topo-draw.hpp"
#include "host.hpp"
#include "presets.hpp"
#include "topo_file.hpp"
#include "topology.hpp"

namespace {

const char kUsage[] =
    "usage: ccl-topo [options]\n"
    "  --topo NAME|FILE   the machine: a preset or a JSON topology file (default: flat)\n"
    "  --np N             ranks to place on it (default: one per chip; flat: this host's cores)\n"
    "  --size BYTES       message size for the allreduce lower bound, K/M/G suffixes (default 1M)\n"
    "  --icl-latency US   ICL latency per hop in microseconds (default 1)\n"
    "  --svg FILE         also draw the machine and its rings to FILE\n"
    "  --dot              print a Graphviz graph instead of the summary\n"
    "  --json             print the machine as a topology file instead of the summary\n"
    "  --no-host          leave out the host summary\n"
    "  -h, --help         this text\n"
    "presets:\n";

struct Options {
    std::string topo = "flat";
    int np = 0;
    size_t size = 1 << 20;
    double icl_latency_us = 1.0;
    std::string svg_path;
    bool dot = false;
    bool json = false;
    bool host = true;
};

// Usage errors and malformed input: one line on stderr, exit status 2.
[[noreturn]] void usage_error(const std::string &message) {
    std::fprintf(stderr, "ccl-topo: %s\n", message.c_str());
    std::exit(2);
}

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
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i], value;
        bool has_value = false;
        size_t eq = arg.find('=');
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_value = true;
        }
        auto take = [&]() {
            if (has_value) return value;
            if (i + 1 >= argc) usage_error(arg + " needs a value (see --help)");
            return std::string(argv[++i]);
        };
        if (arg == "-h" || arg == "--help") {
            std::printf("%s%s", kUsage, nnpccl::describe_presets().c_str());
            std::exit(0);
        } else if (arg == "--topo") {
            o.topo = take();
        } else if (arg == "--np") {
            std::string v = take();
            char *end = nullptr;
            long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0' || n < 1 || n > 1 << 20)
                usage_error("--np needs a positive rank count, got '" + v + "'");
            o.np = static_cast<int>(n);
        } else if (arg == "--size") {
            std::string v = take();
            if (!parse_size(v, &o.size))
                usage_error("--size needs a byte count such as 1048576 or 64M, got '" + v + "'");
        } else if (arg == "--icl-latency") {
            std::string v = take();
            char *end = nullptr;
            o.icl_latency_us = std::strtod(v.c_str(), &end);
            if (v.empty() || *end != '\0' || !(o.icl_latency_us >= 0))
                usage_error("--icl-latency needs microseconds >= 0, got '" + v + "'");
        } else if (arg == "--svg") {
            o.svg_path = take();
        } else if (arg == "--dot") {
            o.dot = true;
        } else if (arg == "--json") {
            o.json = true;
        } else if (arg == "--no-host") {
            o.host = false;
        } else {
            usage_error("unknown argument '" + std::string(argv[i]) + "' (see --help)");
        }
        if (has_value && (arg == "--dot" || arg == "--json" || arg == "--no-host" || arg == "--help"))
            usage_error(arg + " takes no value");
    }
    if (o.dot && o.json) usage_error("--dot and --json both replace the summary; give one");
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
    std::printf("topology %s: %s\n", t.name().c_str(), shape_words(m.shape()));
    if (m.shape() == nnpccl::Shape::Torus)
        std::printf("  torus: %dx%d, wrap-around in both dimensions\n", m.torus().x, m.torus().y);
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
    std::string host_error;
    bool have_host = nnpccl::discover_host(&host, &host_error);
    int nranks = o.np;
    if (nranks == 0 && (o.topo == "flat" || o.topo.empty())) nranks = have_host ? host.cores : 1;

    nnpccl::TopologyOptions topo_options;
    topo_options.icl.latency_us = o.icl_latency_us;
    nnpccl::Topology topology;
    std::string error;
    if (!nnpccl::load_topology(o.topo, nranks, topo_options, &topology, &error)) usage_error(error);

    if (!o.svg_path.empty()) {
        std::ofstream svg(o.svg_path, std::ios::binary);
        svg << ccl_topo::render_svg(topology);
        svg.close();
        if (!svg) {
            std::fprintf(stderr, "ccl-topo: cannot write %s\n", o.svg_path.c_str());
            return 1;
        }
    }
    if (o.dot) {
        std::fputs(ccl_topo::render_dot(topology).c_str(), stdout);
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
    if (o.host) {
        if (have_host)
            std::fputs(nnpccl::describe_host(host).c_str(), stdout);
        else
            std::printf("host: unknown (%s)\n", host_error.c_str());
        std::printf("\n");
    }
    print_topology(topology, o);
    if (!o.svg_path.empty()) std::printf("  drawing: %s\n", o.svg_path.c_str());
    return 0;
}
