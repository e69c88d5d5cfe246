// libFuzzer target: the topology-file parser. Whatever the bytes, parsing
// returns (no crash, no hang, no sanitizer report); a rejection is one line
// naming the source; an accepted file written back out and parsed again
// gives the same machine.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "topo_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    nnpccl::TopologyFile file;
    if (const nnpccl::Status parsed = nnpccl::parse_topology_text(text, "fuzz.json", &file); !parsed) {
        const std::string &error = parsed.message();
        if (error.rfind("fuzz.json:", 0) != 0 || error.find('\n') != std::string::npos) std::abort();
        return 0;
    }
    const std::string written = nnpccl::topology_to_json(file.machine, file.placement);
    nnpccl::TopologyFile again;
    if (!nnpccl::parse_topology_text(written, "written.json", &again)) std::abort();
    if (nnpccl::topology_to_json(again.machine, again.placement) != written) std::abort();
    return 0;
}
