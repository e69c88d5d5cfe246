// The host a rank runs on, as hwloc sees it: packages, NUMA nodes, cores,
// caches and NICs, and what a runtime needs to pin ranks and place memory —
// the core (and its CPUs) for local rank i of n, a core's NUMA node, the NIC
// nearest a NUMA node. Without hwloc at build time the same interface is
// filled from sysconf and /sys with one package and one NUMA node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "status.hpp"

namespace nnpccl {

struct CacheLevel {
    std::string name;        // "L1d", "L1i", "L2", "L3"
    uint64_t size_bytes = 0; // of one instance
    int count = 0;           // instances on the host
};

struct NetworkInterface {
    std::string name;  // e.g. "eth0", "ib0"
    std::string kind;  // "ethernet", "infiniband", "virtual", ...
    int numa_node = -1; // nearest NUMA node; -1 when unknown (virtual devices)
};

struct HostInfo {
    std::string hostname;
    std::string source; // "hwloc 2.9.0" or "sysconf"
    int packages = 0;
    int numa_nodes = 0;
    int cores = 0; // usable cores (the process's allowed set)
    int pus = 0;   // hardware threads on those cores
    std::vector<CacheLevel> caches;
    std::vector<NetworkInterface> nics;
    // Per core, in hwloc's logical order (cores of one package and NUMA node
    // are consecutive): the OS CPU numbers of its hardware threads, and its
    // NUMA node (logical index; 0 when unknown).
    std::vector<std::vector<int>> core_cpus;
    std::vector<int> core_numa_node;
};

// Discovers the host this process runs on. Fails only when the platform
// gives no answer at all; the message says why.
Status discover_host(HostInfo *out);

// Pinning: the core for local rank `local_rank` of `local_ranks` on this
// host, spreading ranks evenly over the cores (so over packages and NUMA
// nodes too); with fewer cores than ranks, round robin over the cores.
int core_for_local_rank(const HostInfo &host, int local_rank, int local_ranks);
// The OS CPU numbers to bind local rank `local_rank` to (all hardware
// threads of its core); empty when nothing should be pinned.
std::vector<int> cpus_for_local_rank(const HostInfo &host, int local_rank, int local_ranks);
// The NUMA node of a core (logical index), or of the core holding an OS CPU; -1 if unknown.
int numa_node_of_core(const HostInfo &host, int core);
int numa_node_of_cpu(const HostInfo &host, int os_cpu);
// The index into host.nics of the NIC nearest `numa_node` (same node first,
// then any with known locality, then any), or -1 when there is none. The
// loopback interface is never listed.
int nearest_nic(const HostInfo &host, int numa_node);

// Parses a CPU list as in NNPCCL_PIN or taskset: "0-3,8,10-11". Fails on
// anything else, naming the offending part.
Status parse_cpu_list(const std::string &text, std::vector<int> *cpus);

// A few lines for people: "host h: 1 package, 1 NUMA node, 2 cores ...".
std::string describe_host(const HostInfo &host);

} // namespace nnpccl
