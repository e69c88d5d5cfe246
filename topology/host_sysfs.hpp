// Linux /sys readings shared by both host discovery back ends (private to
// topology/host_*.cpp).
#pragma once

#include <string>
#include <vector>

namespace nnpccl {

struct SysfsInterface {
    std::string name;
    std::string kind;   // "ethernet", "infiniband", "virtual", "other"
    int os_numa_node = -1; // as the kernel numbers it; -1 when unknown
};

// Network interfaces in /sys/class/net except loopback, sorted by name.
// hwloc lists only devices it finds on a bus; containers and VMs often have
// nothing but virtual interfaces, which this still reports.
std::vector<SysfsInterface> sysfs_network_interfaces();

} // namespace nnpccl
