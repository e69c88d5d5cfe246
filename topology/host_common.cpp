// The parts of host.hpp that do not depend on how the host was discovered.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "host.hpp"
#include "host_sysfs.hpp"

namespace nnpccl {

std::vector<SysfsInterface> sysfs_network_interfaces() {
    namespace fs = std::filesystem;
    std::vector<SysfsInterface> out;
    std::error_code ec;
    for (fs::directory_iterator it("/sys/class/net", ec), end; !ec && it != end; it.increment(ec)) {
        SysfsInterface nic;
        nic.name = it->path().filename().string();
        if (nic.name == "lo") continue;
        const fs::path device = it->path() / "device";
        if (!fs::exists(device, ec)) {
            nic.kind = "virtual";
        } else {
            // ARPHRD_* numbers from linux/if_arp.h: 1 Ethernet, 32 InfiniBand.
            int type = -1;
            std::ifstream(it->path() / "type") >> type;
            nic.kind = type == 1 ? "ethernet" : type == 32 ? "infiniband" : "other";
            std::ifstream(device / "numa_node") >> nic.os_numa_node;
        }
        out.push_back(nic);
    }
    std::sort(out.begin(), out.end(), [](const SysfsInterface &a, const SysfsInterface &b) { return a.name < b.name; });
    return out;
}

int core_for_local_rank(const HostInfo &host, int local_rank, int local_ranks) {
    if (local_ranks < 1 || local_rank < 0 || local_rank >= local_ranks || host.cores < 1) return -1;
    // More ranks than cores: round robin, so neighbouring ranks (a ring's
    // next hop) run on different cores and one core's rank copies while the
    // other's forwards; ranks sharing a core with their neighbour would
    // wait for each other's time slices at every step (docs/performance.md,
    // "Placement").
    if (host.cores < local_ranks) return local_rank % host.cores;
    // Spread: rank i of n takes core floor(i·cores/n), so ranks land on
    // different packages and NUMA nodes before sharing one.
    return static_cast<int>(static_cast<long>(local_rank) * host.cores / local_ranks);
}

std::vector<int> cpus_for_local_rank(const HostInfo &host, int local_rank, int local_ranks) {
    int core = core_for_local_rank(host, local_rank, local_ranks);
    if (core < 0 || core >= static_cast<int>(host.core_cpus.size())) return {};
    return host.core_cpus[static_cast<size_t>(core)];
}

int numa_node_of_core(const HostInfo &host, int core) {
    if (core < 0 || core >= static_cast<int>(host.core_numa_node.size())) return -1;
    return host.core_numa_node[static_cast<size_t>(core)];
}

int numa_node_of_cpu(const HostInfo &host, int os_cpu) {
    for (size_t core = 0; core < host.core_cpus.size(); ++core)
        for (int cpu : host.core_cpus[core])
            if (cpu == os_cpu) return numa_node_of_core(host, static_cast<int>(core));
    return -1;
}

int nearest_nic(const HostInfo &host, int numa_node) {
    int known = -1;
    for (size_t i = 0; i < host.nics.size(); ++i) {
        if (host.nics[i].numa_node == numa_node && numa_node >= 0) return static_cast<int>(i);
        if (known < 0 && host.nics[i].numa_node >= 0) known = static_cast<int>(i);
    }
    if (known >= 0) return known;
    return host.nics.empty() ? -1 : 0;
}

Status parse_cpu_list(const std::string &text, std::vector<int> *cpus) {
    cpus->clear();
    size_t start = 0;
    auto number = [](const std::string &s, int *out) {
        if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return false;
        *out = std::atoi(s.c_str());
        return true;
    };
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        size_t dash = part.find('-');
        int lo = 0, hi = 0;
        bool ok = dash == std::string::npos ? number(part, &lo) && number(part, &hi)
                                            : number(part.substr(0, dash), &lo) && number(part.substr(dash + 1), &hi);
        if (!ok || hi < lo)
            return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                          "CPU list '" + text + "': '" + part + "' is not a CPU number or a range lo-hi");
        for (int c = lo; c <= hi; ++c) cpus->push_back(c);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return Status::ok();
}

namespace {

std::string bytes(uint64_t n) {
    char buf[32];
    if (n >= (1u << 20) && n % (1u << 20) == 0)
        std::snprintf(buf, sizeof buf, "%llu MiB", static_cast<unsigned long long>(n >> 20));
    else if (n >= 1024 && n % 1024 == 0)
        std::snprintf(buf, sizeof buf, "%llu KiB", static_cast<unsigned long long>(n >> 10));
    else
        std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
    return buf;
}

std::string plural(int n, const char *word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

} // namespace

std::string describe_host(const HostInfo &host) {
    std::string out = "host " + host.hostname + " (" + host.source + "): " + plural(host.packages, "package") + ", " +
                      plural(host.numa_nodes, "NUMA node") + ", " + plural(host.cores, "core") + ", " +
                      plural(host.pus, "hardware thread") + "\n";
    out += "  caches:";
    if (host.caches.empty()) out += " unknown";
    for (size_t i = 0; i < host.caches.size(); ++i)
        out += std::string(i ? "," : "") + " " + host.caches[i].name + " " + bytes(host.caches[i].size_bytes) + " x" +
               std::to_string(host.caches[i].count);
    out += "\n  NICs:";
    if (host.nics.empty()) out += " none";
    for (size_t i = 0; i < host.nics.size(); ++i) {
        const NetworkInterface &n = host.nics[i];
        out += std::string(i ? "," : "") + " " + n.name + " (" + n.kind +
               (n.numa_node >= 0 ? ", NUMA " + std::to_string(n.numa_node) : "") + ")";
    }
    out += "\n  cores by NUMA node:";
    for (int node = 0; node < host.numa_nodes; ++node) {
        int first = -1, last = -1;
        for (int c = 0; c < host.cores; ++c)
            if (numa_node_of_core(host, c) == node) {
                if (first < 0) first = c;
                last = c;
            }
        out += " node " + std::to_string(node) + ": " +
               (first < 0 ? std::string("none") : std::to_string(first) + "-" + std::to_string(last));
    }
    return out + "\n";
}

} // namespace nnpccl
