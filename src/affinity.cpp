#include "affinity.hpp"

#include <pthread.h>
#include <sched.h>

#include "host.hpp"
#include "log.hpp"

namespace nnpccl {

namespace {

Status pin_to(const std::vector<int> &cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : cpus)
        if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (rc != 0) return system_error("pinning to CPU(s) starting at %d failed (error %d)", cpus.empty() ? -1 : cpus[0], rc);
    return Status::ok();
}

std::string join(const std::vector<int> &v) {
    std::string out;
    for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
    return out;
}

} // namespace

Status place_local_rank(const std::string &pin_spec, int local_rank, int local_ranks, RankPlacement *out) {
    *out = RankPlacement{};
    HostInfo host;
    if (Status found = discover_host(&host); !found) {
        LOG_INFO("host discovery failed (%s): not pinning", found.message().c_str());
        return Status::ok();
    }
    out->numa_nodes = host.numa_nodes;
    out->cores = host.cores;
    const std::string spec = pin_spec.empty() ? "auto" : pin_spec;
    if (spec == "off") {
        LOG_INFO("NNPCCL_PIN=off: local rank %d is not pinned", local_rank);
    } else if (spec == "auto") {
        int core = core_for_local_rank(host, local_rank, local_ranks);
        if (core < 0) {
            LOG_INFO("not pinning: %d local ranks on %d cores", local_ranks, host.cores);
        } else {
            std::vector<int> cpus = cpus_for_local_rank(host, local_rank, local_ranks);
            NNPCCL_TRY(pin_to(cpus));
            out->pinned_to = format("core %d (CPUs %s)", core, join(cpus).c_str());
            out->numa_node = numa_node_of_core(host, core);
        }
    } else {
        std::vector<int> cpus;
        if (Status parsed = parse_cpu_list(spec, &cpus); !parsed)
            return invalid_argument("NNPCCL_PIN=%s: %s (use auto, off, or a CPU list like 0,2,4-5)", spec.c_str(),
                                    parsed.message().c_str());
        if (static_cast<int>(cpus.size()) < local_ranks)
            return invalid_argument("NNPCCL_PIN=%s lists %zu CPUs for %d local ranks", spec.c_str(), cpus.size(),
                                    local_ranks);
        int cpu = cpus[static_cast<size_t>(local_rank)];
        NNPCCL_TRY(pin_to({cpu}));
        out->pinned_to = format("CPU %d", cpu);
        out->numa_node = numa_node_of_cpu(host, cpu);
    }
    int nic = nearest_nic(host, out->numa_node < 0 ? 0 : out->numa_node);
    if (nic >= 0) out->nic = host.nics[static_cast<size_t>(nic)].name;
    if (!out->pinned_to.empty())
        LOG_INFO("local rank %d of %d pinned to %s, NUMA node %d, nearest NIC %s", local_rank, local_ranks,
                 out->pinned_to.c_str(), out->numa_node, out->nic.empty() ? "none" : out->nic.c_str());
    return Status::ok();
}

} // namespace nnpccl
