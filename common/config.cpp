#include "config.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace nnpccl {

std::string env_string(const char *name) {
    const char *value = std::getenv(name);
    return value != nullptr ? std::string(value) : std::string();
}

Status env_int(const char *name, int min, int max, int *out) {
    std::string text = env_string(name);
    if (text.empty()) return Status::ok();
    char *end = nullptr;
    errno = 0;
    long value = std::strtol(text.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || value < min || value > max)
        return invalid_argument("%s=%s is not a whole number from %d to %d", name, text.c_str(), min, max);
    *out = static_cast<int>(value);
    return Status::ok();
}

Status env_flag(const char *name, bool *out) {
    int value = *out ? 1 : 0;
    NNPCCL_TRY(env_int(name, 0, 1, &value));
    *out = value == 1;
    return Status::ok();
}

Status env_size(const char *name, size_t min, size_t max, const char *range, size_t *out, bool *set) {
    std::string text = env_string(name);
    if (text.empty()) return Status::ok();
    auto bytes = parse_size(text);
    if (!bytes || *bytes < min || *bytes > max)
        return invalid_argument("%s=%s is not a size from %s", name, text.c_str(), range);
    *out = *bytes;
    if (set != nullptr) *set = true;
    return Status::ok();
}

Status env_number(const char *name, double lo, double hi, const char *range, double *out) {
    std::string text = env_string(name);
    if (text.empty()) return Status::ok();
    if (!parse_number_within(text, lo, hi, out))
        return invalid_argument("%s=%s is not a number from %s", name, text.c_str(), range);
    return Status::ok();
}

bool parse_number_within(const std::string &text, double lo, double hi, double *out) {
    if (text.empty()) return false;
    char *end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

Status check_config_size(const nnpccl_config_t *config) {
    if (config->struct_size < offsetof(nnpccl_config_t, blocking) + sizeof(int) ||
        config->struct_size > (size_t{1} << 16))
        return invalid_argument("config->struct_size=%zu is not sizeof(nnpccl_config_t) (%zu); initialise "
                                "the config with NNPCCL_CONFIG_INIT",
                                config->struct_size, sizeof(nnpccl_config_t));
    return Status::ok();
}

Status resolve_stream_slots(int *slots) {
    *slots = kDefaultStreamSlots;
    return env_int("NNPCCL_SHM_SLOTS", 2, 64, slots);
}

} // namespace nnpccl
