#include "machine_options.hpp"

#include "config.hpp"

namespace nnpccl {

Status resolve_machine_options(MachineOptions *out) {
    *out = MachineOptions{};
    out->topology = env_string("NNPCCL_TOPO");
    if (std::string net = env_string("NNPCCL_NET"); !net.empty()) {
        const size_t comma = net.find(',');
        if (!parse_number_within(net.substr(0, comma), 1e-3, 1e4, &out->network_gbps) ||
            (comma != std::string::npos &&
             !parse_number_within(net.substr(comma + 1), 0, 1e6, &out->network_latency_us)))
            return invalid_argument("NNPCCL_NET=%s is not GBPS or GBPS,LATENCY_US (the network between hosts: "
                                    "GB/s per direction from 0.001 to 10000, µs from 0 to 1e6; e.g. 1.25,20)",
                                    net.c_str());
    }
    return Status::ok();
}

} // namespace nnpccl
