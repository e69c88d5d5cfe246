// libFuzzer target: the NNPCCL_ALGO parser. Any text either parses into
// rules that name registered algorithms serving their collective over
// non-empty ranges, or is rejected with a message naming the token.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "algo_override.hpp"
#include "registry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string_view spec(reinterpret_cast<const char *>(data), size);
    nnpccl::AlgoOverride rules;
    if (const nnpccl::Status parsed = rules.parse(spec); !parsed) {
        if (parsed.code() != NNPCCL_ERR_INVALID_ARGUMENT || parsed.message().rfind("NNPCCL_ALGO: ", 0) != 0)
            std::abort();
        return 0;
    }
    for (const nnpccl::AlgoChoice &choice : rules.choices()) {
        const nnpccl::AlgorithmInfo *info = nnpccl::find_algorithm(choice.algorithm);
        if (info == nullptr || !info->serves_collective(choice.collective) || choice.low >= choice.high) std::abort();
        const std::string *picked = rules.pick(choice.collective, choice.low);
        if (picked == nullptr || nnpccl::find_algorithm(*picked) == nullptr) std::abort();
    }
    return 0;
}
