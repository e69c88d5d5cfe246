// Sizes as nnpccl reads them, in its settings (NNPCCL_SHM_BYTES,
// NNPCCL_CHUNK_SIZE) and in the tools' flags: "4096", "512K", "4M", "1G"
// (powers of 1024; "KiB" and a trailing "B" too). Header-only and free of
// the rest of common/, so that a tool which links nothing of the library
// (the peer benches) reads sizes as the library does.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace nnpccl {

// nullopt for anything else, including a sign, a fraction and overflow.
inline std::optional<size_t> parse_size(const std::string &text) {
    if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
    errno = 0;
    char *end = nullptr;
    const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    if (errno != 0) return std::nullopt;
    const std::string suffix(end);
    unsigned shift = 0;
    if (suffix == "K" || suffix == "k" || suffix == "KiB")
        shift = 10;
    else if (suffix == "M" || suffix == "m" || suffix == "MiB")
        shift = 20;
    else if (suffix == "G" || suffix == "g" || suffix == "GiB")
        shift = 30;
    else if (!suffix.empty() && suffix != "B")
        return std::nullopt;
    if (shift != 0 && value > (SIZE_MAX >> shift)) return std::nullopt;
    return static_cast<size_t>(value) << shift;
}

} // namespace nnpccl
