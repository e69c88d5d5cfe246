// ccl-sim's planning outputs for one simulated call: the per-link table
// (--links-csv) and the text report of the bottleneck links and the
// critical path (--report).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "ccl_sim.hpp"

namespace nnpccl::sim {

namespace {

// Where a link goes: its torus dimension and direction ("x+", "y-"), or
// what joins the chips elsewhere.
std::string link_kind(const Machine &m, const Link &l) {
    if (m.chip(l.from).network || m.chip(l.to).network) return "network";
    if (m.shape() == Shape::Flat) return "host";
    if (m.shape() == Shape::Ring) return (l.from + 1) % m.num_chips() == l.to ? "ring+" : "ring-";
    if (m.shape() != Shape::Torus) return "link";
    const TorusDims d = m.torus();
    const int size[3] = {d.x, d.y, d.z}, stride[3] = {1, d.x, d.x * d.y};
    static const char *const kAxis[3] = {"x", "y", "z"};
    for (int k = 0; k < 3; ++k) {
        const int a = l.from / stride[k] % size[k], b = l.to / stride[k] % size[k];
        if (a != b) return std::string(kAxis[k]) + ((a + 1) % size[k] == b ? "+" : "-");
    }
    return "link";
}

// A server as a person reads it: "chip 3 -> chip 4 (x+)", or a chip's port.
std::string server_name(const Network &network, uint32_t server) {
    const Machine &m = network.topology().machine();
    if (server < network.link_count()) {
        const Link &l = m.links()[server];
        return "chip " + std::to_string(l.from) + " -> chip " + std::to_string(l.to) + " (" + link_kind(m, l) + ")";
    }
    return "a chip's port (server " + std::to_string(server) + ")";
}

// The chips a route visits: "3>4>5".
std::string route_chips(const Network &network, const std::vector<uint32_t> &servers) {
    const std::vector<Link> &links = network.topology().machine().links();
    std::string s;
    for (uint32_t server : servers) {
        if (server >= network.link_count()) continue;
        if (s.empty()) s = std::to_string(links[server].from);
        s += ">" + std::to_string(links[server].to);
    }
    return s.empty() ? "its chip" : "chips " + s;
}

std::string mb(double bytes) {
    char buf[32];
    if (bytes >= 1e9)
        std::snprintf(buf, sizeof buf, "%.3g GB", bytes / 1e9);
    else
        std::snprintf(buf, sizeof buf, "%.3g MB", bytes / 1e6);
    return buf;
}

std::string share(double part, double whole) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", whole > 0 ? 100 * part / whole : 0.0);
    return buf;
}

void print_bottlenecks(const Network &network, const SimResult &r, int top) {
    const std::vector<Link> &links = network.topology().machine().links();
    std::vector<size_t> order(links.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r.busy_us[a] > r.busy_us[b]; });
    double moved = 0, busy_sum = 0;
    size_t used = 0;
    for (size_t l = 0; l < links.size(); ++l) {
        moved += r.bytes[l];
        busy_sum += r.busy_us[l];
        used += r.bytes[l] > 0;
    }
    std::printf("# links: %zu directed, %zu carried traffic, %s over links in all; mean utilisation of those %s\n",
                links.size(), used, mb(moved).c_str(),
                share(used > 0 ? busy_sum / static_cast<double>(used) : 0, r.time_us).c_str());
    std::printf("# bottleneck links (busiest first; utilisation = busy time over the call's %.6g us):\n", r.time_us);
    for (size_t i = 0; i < order.size() && i < static_cast<size_t>(top); ++i) {
        const size_t l = order[i];
        if (r.bytes[l] <= 0) break;
        std::printf("#   %-28s busy %10.6g us  %6s  %10s  peak queue %s\n",
                    server_name(network, static_cast<uint32_t>(l)).c_str(), r.busy_us[l],
                    share(r.busy_us[l], r.time_us).c_str(), mb(r.bytes[l]).c_str(), mb(r.peak_queue_bytes[l]).c_str());
    }
}

void print_path_message(const Network &network, const PathMessage &m) {
    std::printf("#     %10.6g us  rank %d -> rank %d via %s, %zu B: latency %.4g, data %.4g, %swaiting %.4g us\n",
                m.sent_us, m.from_rank, m.to_rank, route_chips(network, m.servers).c_str(), m.bytes, m.latency_us,
                m.data_us,
                m.overhead_us > 0 ? ("overhead " + std::to_string(m.overhead_us).substr(0, 6) + ", ").c_str() : "",
                m.waiting_us);
}

void print_critical_path(const Network &network, const Cell &cell, int top) {
    const SimResult &r = cell.sim.result;
    const CriticalPath &p = r.critical_path;
    const double total = p.latency_us + p.data_us + p.overhead_us + p.link_wait_us + p.reduce_us + p.reducer_wait_us;
    std::vector<int> ranks;
    for (const PathMessage &m : p.messages) {
        ranks.push_back(m.from_rank);
        ranks.push_back(m.to_rank);
    }
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    if (cell.sim.extrapolated)
        std::printf("# critical path of the call cut to %zu elements (simulated; the whole call is extrapolated from "
                    "it):\n",
                    cell.sim.counts[1]);
    std::printf("# critical path: %.6g us, %llu steps, %zu messages across %zu ranks\n", total,
                static_cast<unsigned long long>(p.steps), p.messages.size(), ranks.size());
    std::printf("#   link latency %.6g us (%s), data %.6g us (%s), waiting behind other traffic %.6g us (%s)\n",
                p.latency_us, share(p.latency_us, total).c_str(), p.data_us, share(p.data_us, total).c_str(),
                p.link_wait_us, share(p.link_wait_us, total).c_str());
    std::printf("#   reduction %.6g us (%s), waiting for a chip's reducer %.6g us (%s), per-message overhead %.6g us "
                "(%s); %llu of its steps waited for a free slot\n",
                p.reduce_us, share(p.reduce_us, total).c_str(), p.reducer_wait_us,
                share(p.reducer_wait_us, total).c_str(), p.overhead_us, share(p.overhead_us, total).c_str(),
                static_cast<unsigned long long>(p.slot_waits));
    const size_t n = p.messages.size(), half = static_cast<size_t>(std::max(1, top / 2));
    std::printf("#   its messages in order%s:\n",
                n > 2 * half
                    ? (" (the first and last " + std::to_string(half) + " of " + std::to_string(n) + ")").c_str()
                    : "");
    for (size_t i = 0; i < n; ++i) {
        if (n > 2 * half && i == half) {
            std::printf("#     ...\n");
            i = n - half;
        }
        print_path_message(network, p.messages[i]);
    }
    std::map<uint32_t, size_t> on_path;
    for (const PathMessage &m : p.messages)
        for (uint32_t s : m.servers) ++on_path[s];
    std::vector<std::pair<size_t, uint32_t>> most;
    for (const auto &[server, count] : on_path) most.push_back({count, server});
    std::stable_sort(most.begin(), most.end(), [](const auto &a, const auto &b) { return a.first > b.first; });
    std::string line;
    for (size_t i = 0; i < most.size() && i < 4; ++i)
        line += (i > 0 ? "; " : "") + server_name(network, most[i].second) + " " + std::to_string(most[i].first) + "x";
    if (!line.empty()) std::printf("#   the links it crosses most: %s\n", line.c_str());
}

} // namespace

Status write_links_csv(const std::string &path, const Network &network, const Cell &cell) {
    const Machine &m = network.topology().machine();
    const SimResult &r = cell.sim.result;
    std::ofstream out(path, std::ios::binary);
    out << "link,from_chip,to_chip,kind,gbps,latency_us,bytes,busy_us,utilisation,peak_queue_bytes\n";
    char line[256];
    for (size_t l = 0; l < m.links().size(); ++l) {
        const Link &k = m.links()[l];
        std::snprintf(line, sizeof line, "%zu,%d,%d,%s,%g,%g,%.0f,%.6g,%.6f,%.0f\n", l, k.from, k.to,
                      link_kind(m, k).c_str(), k.gbps, k.latency_us, r.bytes[l], r.busy_us[l],
                      r.time_us > 0 ? r.busy_us[l] / r.time_us : 0.0, r.peak_queue_bytes[l]);
        out << line;
    }
    out.close();
    if (!out) return system_error("--links-csv %s: cannot write it", path.c_str());
    return Status::ok();
}

void print_report(const Run &run, const Network &network, const Cell &cell) {
    const SimResult &r = cell.sim.result;
    std::printf("# report: %s with %s on %s, %d ranks, %.6g us%s%s\n", run.o.collective.c_str(), cell.algorithm->name,
                run.topology.name().c_str(), run.p, r.time_us, cell.sim.extrapolated ? " (extrapolated)" : "",
                run.fidelity_note.empty() ? "" : ("; " + run.fidelity_note).c_str());
    if (!run.what_if_summary.empty()) std::printf("# what if: %s\n", run.what_if_summary.c_str());
    print_bottlenecks(network, r, run.o.top);
    print_critical_path(network, cell, run.o.top);
}

} // namespace nnpccl::sim
