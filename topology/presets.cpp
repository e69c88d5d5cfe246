#include "presets.hpp"

#include <algorithm>
#include <cstdlib>

namespace nnpccl {

namespace {

// Every builder below only adds well-formed links, so a failure here is a
// bug in the builder, not in the caller's input.
void must_link(Machine *m, int a, int b, LinkParams params) {
    if (!m->add_duplex_link(a, b, params)) std::abort();
}

// A positive integer no larger than `max`, the whole of `text`.
bool parse_count(const std::string &text, int max, int *out) {
    if (text.empty() || text.size() > 9) return false;
    for (char c : text)
        if (c < '0' || c > '9') return false;
    long v = std::strtol(text.c_str(), nullptr, 10);
    if (v < 1 || v > max) return false;
    *out = static_cast<int>(v);
    return true;
}

bool starts_with(const std::string &s, const char *prefix) { return s.rfind(prefix, 0) == 0; }

// The largest machine a preset may describe: pod1024 and some headroom.
constexpr int kMaxPresetChips = 65536;
// The most ranks a `hosts:` preset may hold: its intra-host links are
// quadratic in the ranks per host.
constexpr int kMaxPresetRanks = 4096;

// `hosts:HxL` (H hosts of L ranks) or `hosts:A,B,...` (a host per count).
Status parse_host_counts(const std::string &spec, std::vector<int> *counts) {
    const std::string body = spec.substr(6);
    const Status wrong(NNPCCL_ERR_INVALID_ARGUMENT,
                       "topology '" + spec +
                           "': hosts:HxL needs H hosts of L ranks (e.g. hosts:2x4), or hosts:A,B,... " +
                           "a rank count per host (e.g. hosts:3,1); at least 2 hosts and at most " +
                           std::to_string(kMaxPresetRanks) + " ranks");
    int x = 0, y = 0;
    const size_t cross = body.find('x');
    if (cross != std::string::npos) {
        if (!parse_count(body.substr(0, cross), kMaxPresetRanks, &x) ||
            !parse_count(body.substr(cross + 1), kMaxPresetRanks, &y))
            return wrong;
        counts->assign(static_cast<size_t>(x), y);
    } else {
        size_t start = 0;
        for (;;) {
            const size_t comma = body.find(',', start);
            if (!parse_count(body.substr(start, comma - start), kMaxPresetRanks, &x)) return wrong;
            counts->push_back(x);
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    }
    long total = 0;
    for (int c : *counts) total += c;
    if (counts->size() < 2 || total > kMaxPresetRanks) return wrong;
    return Status::ok();
}

// The ranks' hosts "H0,H1,...", one per rank, host g named `counts[g]`
// times: the grouping after `hosts:LAYOUT:`.
Status parse_rank_hosts(const std::string &spec, const std::string &list, const std::vector<int> &counts,
                        std::vector<std::string> *host_of_rank) {
    std::vector<int> seen(counts.size(), 0);
    std::vector<std::string> hosts;
    size_t start = 0;
    for (;;) {
        const size_t comma = list.find(',', start);
        int g = 0;
        const std::string item = list.substr(start, comma - start);
        // parse_count takes 1..max; host indices start at 0.
        if (!(item == "0" || parse_count(item, static_cast<int>(counts.size()) - 1, &g)))
            return Status(NNPCCL_ERR_INVALID_ARGUMENT, "topology '" + spec + "': '" + item +
                                                           "' is not a host index 0-" +
                                                           std::to_string(counts.size() - 1));
        ++seen[static_cast<size_t>(g)];
        hosts.push_back("host" + std::to_string(g));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (seen != counts)
        return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                      "topology '" + spec + "': the ranks' hosts after the second ':' do not give each host the " +
                          "ranks its layout says");
    *host_of_rank = hosts;
    return Status::ok();
}

// "XxY" or "XxYxZ" into dims (z stays 1 for two), at least 2 chips in all.
bool parse_torus_dims(const std::string &text, int dims[3]) {
    size_t start = 0;
    long chips = 1;
    for (int k = 0; k < 3; ++k) {
        const size_t cross = text.find('x', start);
        if (!parse_count(text.substr(start, cross - start), kMaxPresetChips, &dims[k])) return false;
        chips *= dims[k];
        if (chips > kMaxPresetChips) return false;
        if (cross == std::string::npos) return k >= 1 && chips >= 2;
        start = cross + 1;
    }
    return false;
}

} // namespace

TopologyOptions topology_options(const MachineOptions &machine, bool host_over_network) {
    TopologyOptions options;
    if (host_over_network) options.host.latency_us = kHostOverNetworkLatencyUs;
    if (machine.network_gbps > 0) options.network.gbps = machine.network_gbps;
    if (machine.network_latency_us >= 0) options.network.latency_us = machine.network_latency_us;
    return options;
}

Machine ring_machine(int n, LinkParams icl) {
    Machine m("ring:" + std::to_string(n), Shape::Ring);
    for (int i = 0; i < n; ++i) m.add_chip();
    for (int i = 0; i + 1 < n; ++i) must_link(&m, i, i + 1, icl);
    if (n > 2) must_link(&m, n - 1, 0, icl);
    return m;
}

Machine fully_connected_machine(int n, LinkParams icl) {
    Machine m("fc:" + std::to_string(n), Shape::FullyConnected);
    Chip chip;
    LinkParams link = icl;
    if (n - 1 > kIclPortsPerChip) {
        chip.ports = n - 1;
        link.gbps = icl.gbps / kIclPortGbps * kIclQuadGbps * (kIclQuadsPerChip / (n - 1));
    }
    for (int i = 0; i < n; ++i) m.add_chip(chip);
    for (int a = 0; a < n; ++a)
        for (int b = a + 1; b < n; ++b) must_link(&m, a, b, link);
    return m;
}

Machine hybrid_cube_mesh_machine(LinkParams icl) {
    Machine m("hcm8", Shape::HybridCubeMesh);
    for (int i = 0; i < 8; ++i) m.add_chip();
    for (int quad = 0; quad < 8; quad += 4)
        for (int a = 0; a < 4; ++a)
            for (int b = a + 1; b < 4; ++b) must_link(&m, quad + a, quad + b, icl);
    for (int i = 0; i < 4; ++i) must_link(&m, i, i + 4, icl);
    return m;
}

Machine torus_machine(int x_dim, int y_dim, LinkParams icl) { return torus_machine(x_dim, y_dim, 1, icl); }

Machine torus_machine(int x_dim, int y_dim, int z_dim, LinkParams icl) {
    std::string name = "torus:" + std::to_string(x_dim) + "x" + std::to_string(y_dim);
    if (z_dim > 1) name += "x" + std::to_string(z_dim);
    Machine m(name, Shape::Torus);
    m.set_torus({x_dim, y_dim, z_dim});
    const int dims[3] = {x_dim, y_dim, z_dim}, stride[3] = {1, x_dim, x_dim * y_dim};
    Chip chip;
    if (z_dim > 1) chip.ports = 6;
    for (int i = 0; i < x_dim * y_dim * z_dim; ++i) m.add_chip(chip);
    for (int c = 0; c < m.num_chips(); ++c)
        for (int k = 0; k < 3; ++k) {
            // The + neighbour; with a dimension of 2 the wrap-around
            // neighbour is the same chip, already cabled.
            const int at = c / stride[k] % dims[k];
            if (dims[k] > 1 && (at + 1 < dims[k] || dims[k] > 2))
                must_link(&m, c, c + ((at + 1) % dims[k] - at) * stride[k], icl);
        }
    return m;
}

Machine flat_machine(int n, LinkParams host) {
    Machine m("flat", Shape::Flat);
    Chip chip;
    chip.ports = n > 1 ? n - 1 : 1;
    chip.injection_gbps = host.gbps;
    for (int i = 0; i < n; ++i) m.add_chip(chip);
    for (int a = 0; a < n; ++a)
        for (int b = a + 1; b < n; ++b) must_link(&m, a, b, host);
    return m;
}

Machine hosts_machine(const std::string &name, const std::vector<std::string> &host_of_rank, LinkParams host,
                      LinkParams network) {
    Machine m(name, Shape::Flat);
    std::vector<std::string> hosts;
    std::vector<int> host_index;
    for (const std::string &h : host_of_rank) {
        auto it = std::find(hosts.begin(), hosts.end(), h);
        host_index.push_back(static_cast<int>(it - hosts.begin()));
        if (it == hosts.end()) hosts.push_back(h);
    }
    const int p = static_cast<int>(host_of_rank.size()), h = static_cast<int>(hosts.size());
    for (int r = 0; r < p; ++r) {
        Chip chip;
        chip.host = host_of_rank[static_cast<size_t>(r)];
        chip.ports = p; // its host's ranks and its NIC
        chip.injection_gbps = host.gbps;
        m.add_chip(chip);
    }
    // Nodes p + 2g and p + 2g + 1: host g's NIC, out and in; then the switch.
    for (int g = 0; g < h; ++g)
        for (int way = 0; way < 2; ++way) {
            Chip nic;
            nic.host = hosts[static_cast<size_t>(g)];
            nic.ports = p + 1;
            nic.network = true;
            m.add_chip(nic);
        }
    Chip fabric;
    fabric.ports = 2 * h;
    fabric.network = true;
    const int switch_node = m.add_chip(fabric);
    for (int a = 0; a < p; ++a)
        for (int b = a + 1; b < p; ++b)
            if (host_index[static_cast<size_t>(a)] == host_index[static_cast<size_t>(b)]) must_link(&m, a, b, host);
    // A rank reaches its NIC through memory: the host link's bandwidth and
    // no latency of its own (the network's figure is the whole trip).
    const LinkParams to_nic{host.gbps, 0.0}, half_network{network.gbps, network.latency_us / 2};
    for (int r = 0; r < p; ++r) {
        const int g = host_index[static_cast<size_t>(r)];
        if (!m.add_link(r, p + 2 * g, to_nic) || !m.add_link(p + 2 * g + 1, r, to_nic)) std::abort();
    }
    for (int g = 0; g < h; ++g)
        if (!m.add_link(p + 2 * g, switch_node, half_network) || !m.add_link(switch_node, p + 2 * g + 1, half_network))
            std::abort();
    return m;
}

bool is_preset_spec(const std::string &spec) {
    return spec == "flat" || starts_with(spec, "hosts:") || spec == "hcm8" || starts_with(spec, "nnpt-") ||
           starts_with(spec, "ring:") || starts_with(spec, "fc:") || starts_with(spec, "torus:");
}

Status build_preset(const std::string &spec, int nranks, const TopologyOptions &options, Machine *out) {
    const LinkParams icl = options.icl;
    int n = 0;
    if (spec == "flat") {
        if (nranks < 1)
            return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                          "flat: the number of ranks is needed (the flat model has one chip per rank)");
        *out = flat_machine(nranks, options.host);
    } else if (spec == "hcm8") {
        *out = hybrid_cube_mesh_machine(icl);
    } else if (spec == "nnpt-hcm8") {
        *out = hybrid_cube_mesh_machine(icl);
        out->set_name(spec);
    } else if (spec == "nnpt-ring8") {
        *out = ring_machine(8, icl);
        out->set_name(spec);
    } else if (spec == "nnpt-pod32" || spec == "nnpt-pod1024") {
        bool pod32 = spec == "nnpt-pod32";
        *out = pod32 ? torus_machine(8, 4, icl) : torus_machine(32, 32, icl);
        out->set_name(spec);
        // A POD is chassis of 8 chips (one host each), chained along x.
        for (int c = 0; c < out->num_chips(); ++c) out->mutable_chip(c).host = "chassis" + std::to_string(c / 8);
    } else if (starts_with(spec, "hosts:")) {
        // hosts:LAYOUT[:H0,H1,...]: after a second colon, each rank's host
        // (how a job whose ranks are not dealt host by host is named).
        const size_t colon = spec.find(':', 6);
        std::vector<int> counts;
        NNPCCL_TRY(parse_host_counts(spec.substr(0, colon), &counts));
        std::vector<std::string> host_of_rank;
        for (size_t g = 0; g < counts.size(); ++g)
            for (int i = 0; i < counts[g]; ++i) host_of_rank.push_back("host" + std::to_string(g));
        if (colon != std::string::npos)
            NNPCCL_TRY(parse_rank_hosts(spec, spec.substr(colon + 1), counts, &host_of_rank));
        if (nranks > 0 && nranks != static_cast<int>(host_of_rank.size()))
            return Status(NNPCCL_ERR_INVALID_ARGUMENT, "topology '" + spec + "' has " +
                                                           std::to_string(host_of_rank.size()) + " ranks, not " +
                                                           std::to_string(nranks));
        *out = hosts_machine(spec, host_of_rank, options.host, options.network);
    } else if (starts_with(spec, "ring:")) {
        if (!parse_count(spec.substr(5), kMaxPresetChips, &n) || n < 2)
            return Status(NNPCCL_ERR_INVALID_ARGUMENT, "topology '" + spec + "': ring:N needs a chip count N >= 2");
        *out = ring_machine(n, icl);
    } else if (starts_with(spec, "fc:")) {
        if (!parse_count(spec.substr(3), kMaxPresetChips, &n) || n < 2 || n - 1 > kIclQuadsPerChip)
            return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                          "topology '" + spec + "': fc:N needs 2 <= N <= " + std::to_string(kIclQuadsPerChip + 1) +
                              " (a chip's 16 ICL quads cannot reach more peers)");
        *out = fully_connected_machine(n, icl);
    } else if (starts_with(spec, "torus:")) {
        int dims[3] = {1, 1, 1};
        if (!parse_torus_dims(spec.substr(6), dims))
            return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                          "topology '" + spec + "': torus:XxY or torus:XxYxZ needs positive sizes, at least 2 and " +
                              "at most " + std::to_string(kMaxPresetChips) + " chips (e.g. torus:8x4, torus:4x4x4)");
        *out = torus_machine(dims[0], dims[1], dims[2], icl);
    } else {
        return Status(NNPCCL_ERR_INVALID_ARGUMENT, "unknown preset '" + spec + "'; presets are: " +
                                                       "ring:N fc:N hcm8 torus:XxY torus:XxYxZ nnpt-ring8 nnpt-hcm8 "
                                                       "nnpt-pod32 nnpt-pod1024 flat hosts:HxL hosts:A,B,...");
    }
    return Status::ok();
}

std::string describe_presets() {
    return "  ring:N        N chips on a bidirectional ICL ring\n"
           "  fc:N          N chips, every pair cabled (ports split into quads beyond 5 chips)\n"
           "  hcm8          8-chip hybrid cube mesh: two fully connected quads, chip i cabled to i+4\n"
           "  torus:XxY     X x Y 2D torus with wrap-around\n"
           "  torus:XxYxZ   X x Y x Z 3D torus with wrap-around (six ports per chip)\n"
           "  nnpt-ring8    NNP-T: 8 chips on an ICL ring\n"
           "  nnpt-hcm8     NNP-T: 8-way OAM baseboard, hybrid cube mesh\n"
           "  nnpt-pod32    NNP-T: 4 chassis x 8 chips, glueless 8x4 torus\n"
           "  nnpt-pod1024  NNP-T: 32x32 torus (for simulation)\n"
           "  flat          one chip per rank, every pair linked at host speed (the default)\n"
           "  hosts:HxL     H hosts of L ranks each: flat within a host, hosts joined by a network\n"
           "  hosts:A,B,..  hosts of A, B, ... ranks (a job on several hosts is planned on this)\n";
}

} // namespace nnpccl
