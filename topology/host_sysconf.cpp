// Host discovery without hwloc: the CPUs this process may run on, each its
// own core, in one package and one NUMA node; caches from glibc's sysconf.
#include <sched.h>
#include <unistd.h>

#include "host.hpp"
#include "host_sysfs.hpp"

namespace nnpccl {

Status discover_host(HostInfo *out) {
    *out = HostInfo();
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    out->hostname = name;
    out->source = "sysconf";
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return Status(NNPCCL_ERR_SYSTEM, "sched_getaffinity failed: cannot tell which CPUs this process may use");
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &allowed)) {
            out->core_cpus.push_back({cpu});
            out->core_numa_node.push_back(0);
        }
    out->packages = 1;
    out->numa_nodes = 1;
    out->cores = static_cast<int>(out->core_cpus.size());
    out->pus = out->cores;
    struct {
        int key;
        const char *name;
    } levels[] = {{_SC_LEVEL1_DCACHE_SIZE, "L1d"}, {_SC_LEVEL1_ICACHE_SIZE, "L1i"}, {_SC_LEVEL2_CACHE_SIZE, "L2"},
                  {_SC_LEVEL3_CACHE_SIZE, "L3"}};
    for (const auto &level : levels) {
        long size = sysconf(level.key);
        // The instance count is not known here; 1 is what can be said.
        if (size > 0) out->caches.push_back(CacheLevel{level.name, static_cast<uint64_t>(size), 1});
    }
    for (const SysfsInterface &s : sysfs_network_interfaces())
        out->nics.push_back(NetworkInterface{s.name, s.kind, s.os_numa_node >= 0 ? 0 : -1});
    return Status::ok();
}

} // namespace nnpccl
