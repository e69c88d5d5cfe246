// Host discovery with hwloc (built when meson finds it).
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "host.hpp"
#include "host_sysfs.hpp"

namespace nnpccl {

namespace {

// The logical index of the first NUMA node whose CPUs include `cpuset`
// (or overlap it), 0 if none does.
int numa_node_of_cpuset(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset) {
    int nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int pass = 0; pass < 2; ++pass)
        for (int n = 0; n < nodes; ++n) {
            hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(n));
            if (pass == 0 ? hwloc_bitmap_isincluded(cpuset, node->cpuset)
                          : hwloc_bitmap_intersects(cpuset, node->cpuset))
                return n;
        }
    return 0;
}

void add_cache(hwloc_topology_t topo, hwloc_obj_type_t type, const char *name, HostInfo *out) {
    int count = hwloc_get_nbobjs_by_type(topo, type);
    if (count <= 0) return;
    hwloc_obj_t first = hwloc_get_obj_by_type(topo, type, 0);
    out->caches.push_back(CacheLevel{name, first->attr->cache.size, count});
}

} // namespace

Status discover_host(HostInfo *out) {
    *out = HostInfo();
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) return Status(NNPCCL_ERR_SYSTEM, "hwloc: cannot initialise a topology");
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    hwloc_topology_set_icache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL); // hidden by default
    // GPUs are not what we look for, and the OpenCL and GL plugins cost
    // time at every init. The libpciaccess-based "pci" plugin leaks about
    // 1 KiB per load (LeakSanitizer shows it); on Linux the "linux"
    // component reads the same PCI devices and NIC locality from sysfs.
    for (const char *plugin : {"opencl", "gl", "pci"})
        hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, plugin);
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return Status(NNPCCL_ERR_SYSTEM, "hwloc: cannot read this host's topology");
    }
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    out->hostname = name;
    out->source = "hwloc " HWLOC_VERSION;
    out->packages = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
    out->numa_nodes = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE));
    out->pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    // Some virtual machines report hardware threads but no cores: then each
    // thread counts as a core.
    hwloc_obj_type_t core_type = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    out->cores = hwloc_get_nbobjs_by_type(topo, core_type);
    for (int c = 0; c < out->cores; ++c) {
        hwloc_obj_t core = hwloc_get_obj_by_type(topo, core_type, static_cast<unsigned>(c));
        std::vector<int> cpus;
        for (int id = hwloc_bitmap_first(core->cpuset); id != -1; id = hwloc_bitmap_next(core->cpuset, id))
            cpus.push_back(id);
        out->core_cpus.push_back(cpus);
        out->core_numa_node.push_back(numa_node_of_cpuset(topo, core->cpuset));
    }
    add_cache(topo, HWLOC_OBJ_L1CACHE, "L1d", out);
    add_cache(topo, HWLOC_OBJ_L1ICACHE, "L1i", out);
    add_cache(topo, HWLOC_OBJ_L2CACHE, "L2", out);
    add_cache(topo, HWLOC_OBJ_L3CACHE, "L3", out);

    std::set<std::string> listed;
    for (hwloc_obj_t dev = hwloc_get_next_osdev(topo, nullptr); dev != nullptr; dev = hwloc_get_next_osdev(topo, dev)) {
        if (dev->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK && dev->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS)
            continue;
        NetworkInterface nic;
        nic.name = dev->name != nullptr ? dev->name : "?";
        nic.kind = dev->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS ? "openfabrics" : "ethernet";
        hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topo, dev);
        if (near != nullptr && near->cpuset != nullptr) nic.numa_node = numa_node_of_cpuset(topo, near->cpuset);
        listed.insert(nic.name);
        out->nics.push_back(nic);
    }
    for (const SysfsInterface &s : sysfs_network_interfaces()) {
        if (listed.count(s.name)) continue;
        NetworkInterface nic{s.name, s.kind, -1};
        if (s.os_numa_node >= 0) {
            hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topo, static_cast<unsigned>(s.os_numa_node));
            if (node != nullptr) nic.numa_node = static_cast<int>(node->logical_index);
        }
        out->nics.push_back(nic);
    }
    hwloc_topology_destroy(topo);
    return Status::ok();
}

} // namespace nnpccl
