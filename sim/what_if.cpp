#include "what_if.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace nnpccl::sim {

namespace {

bool read_chip(const std::string &text, int *out) {
    if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::atoi(text.c_str());
    return true;
}

std::string figure(double value) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", value);
    return buf;
}

// What is wrong with the failures on `m`, or an empty string.
std::string check_failures(const WhatIf &w, const Machine &m) {
    const int n = m.num_chips();
    for (int chip : w.failed_chips)
        if (chip < 0 || chip >= n)
            return "--fail-chip " + std::to_string(chip) + ": " + m.name() + " has chips 0-" + std::to_string(n - 1);
    for (const auto &[a, b] : w.failed_links) {
        const std::string flag = "--fail-link " + std::to_string(a) + "-" + std::to_string(b) + ": ";
        if (a < 0 || a >= n || b < 0 || b >= n) return flag + m.name() + " has chips 0-" + std::to_string(n - 1);
        if (!m.has_link(a, b) && !m.has_link(b, a)) {
            std::string near;
            for (int c : m.duplex_neighbours(a)) near += (near.empty() ? "" : ", ") + std::to_string(c);
            return flag + "chips " + std::to_string(a) + " and " + std::to_string(b) + " are not cabled (chip " +
                   std::to_string(a) + "'s neighbours: " + (near.empty() ? "none" : near) + ")";
        }
    }
    return "";
}

bool failed_link(const WhatIf &w, int from, int to) {
    for (const auto &[a, b] : w.failed_links)
        if ((a == from && b == to) || (a == to && b == from)) return true;
    return std::find(w.failed_chips.begin(), w.failed_chips.end(), from) != w.failed_chips.end() ||
           std::find(w.failed_chips.begin(), w.failed_chips.end(), to) != w.failed_chips.end();
}

std::string describe(const WhatIf &w, int ranks_before, int ranks_after) {
    std::string s;
    auto add = [&](const std::string &part) { s += (s.empty() ? "" : "; ") + part; };
    if (w.link_gbps > 0) add("every link " + figure(w.link_gbps) + " GB/s");
    if (w.link_latency_us >= 0) add("every link " + figure(w.link_latency_us) + " us");
    for (const auto &[a, b] : w.failed_links)
        add("cable " + std::to_string(a) + "-" + std::to_string(b) + " down (routes go around it)");
    for (int chip : w.failed_chips) add("chip " + std::to_string(chip) + " gone");
    if (ranks_after != ranks_before)
        add(std::to_string(ranks_after) + " ranks on the other chips (of " + std::to_string(ranks_before) + ")");
    return s;
}

} // namespace

bool parse_chip_pair(const std::string &text, std::pair<int, int> *out) {
    const size_t dash = text.find('-');
    return dash != std::string::npos && read_chip(text.substr(0, dash), &out->first) &&
           read_chip(text.substr(dash + 1), &out->second) && out->first != out->second;
}

Status apply_what_if(const WhatIf &w, Topology *topology, std::string *summary) {
    const Machine &m = topology->machine();
    if (std::string why = check_failures(w, m); !why.empty()) return Status(NNPCCL_ERR_INVALID_ARGUMENT, why);
    Machine changed(m.name(), m.shape());
    changed.set_torus(m.torus());
    for (const Chip &chip : m.chips()) {
        Chip c = chip;
        // A chip's own injection limit is its host's link (flat): it follows the links.
        if (w.link_gbps > 0 && c.injection_gbps > 0) c.injection_gbps = w.link_gbps;
        changed.add_chip(c);
    }
    for (const Link &l : m.links()) {
        if (failed_link(w, l.from, l.to)) continue;
        LinkParams params{w.link_gbps > 0 ? w.link_gbps : l.gbps,
                          w.link_latency_us >= 0 ? w.link_latency_us : l.latency_us};
        NNPCCL_TRY(changed.add_link(l.from, l.to, params));
    }
    std::vector<int> placement;
    for (int chip : topology->placement())
        if (std::find(w.failed_chips.begin(), w.failed_chips.end(), chip) == w.failed_chips.end())
            placement.push_back(chip);
    if (placement.empty())
        return Status(NNPCCL_ERR_INVALID_ARGUMENT, "--fail-chip: no chip of the job is left to run on");
    const int before = topology->nranks();
    Topology rebuilt;
    if (Status s = Topology::create(std::move(changed), placement, static_cast<int>(placement.size()), &rebuilt); !s)
        return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                      "the machine with " + describe(w, before, static_cast<int>(placement.size())) +
                          " cannot run the job: " + s.message() +
                          " (fail fewer cables or chips, or place the job on chips the failures leave joined: --np)");
    *summary = describe(w, before, rebuilt.nranks());
    *topology = std::move(rebuilt);
    return Status::ok();
}

} // namespace nnpccl::sim
