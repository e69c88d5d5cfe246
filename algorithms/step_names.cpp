#include "step_names.hpp"

#include <array>
#include <iterator>

#include "schedule.hpp"
#include "status.hpp"

namespace nnpccl {

std::string_view step_verb(uint8_t flags) {
    static const auto table = [] {
        std::array<std::string, 16> names;
        for (unsigned f = 0; f < names.size(); ++f) {
            std::string &n = names[f];
            const auto part = [&n](const char *p) { n += (n.empty() ? "" : "-") + std::string(p); };
            if ((f & kRecv) != 0) part("recv");
            if ((f & kReduce) != 0) part("reduce");
            if ((f & kStore) != 0) part("copy");
            if ((f & kSend) != 0) part("send");
            if (n.empty()) n = "nothing";
        }
        return names;
    }();
    return table[flags & 15u];
}

std::string trace_size(size_t bytes) {
    if (bytes < 1024) return std::to_string(bytes) + " B";
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(bytes) / 1024;
    size_t unit = 0;
    while (value >= 1024 && unit + 1 < std::size(units)) {
        value /= 1024;
        ++unit;
    }
    // 9.95 and up would print as 10.0, so they are written as 10.
    return format(value < 9.95 ? "%.1f %s" : "%.0f %s", value, units[unit]);
}

std::string trace_step_name(uint8_t flags, size_t bytes, int recv_peer, int send_peer) {
    std::string name = std::string(step_verb(flags)) + " " + trace_size(bytes);
    if ((flags & kRecv) != 0) name += " from " + std::to_string(recv_peer);
    if ((flags & kSend) != 0) name += " to " + std::to_string(send_peer);
    return name;
}

} // namespace nnpccl
