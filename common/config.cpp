#include "config.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace nnpccl {

std::string env_string(const char *name) {
    const char *value = std::getenv(name);
    return value != nullptr ? std::string(value) : std::string();
}

namespace {

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

// `text` is one number, from lo to hi.
bool number_within(const std::string &text, double lo, double hi, double *out) {
    if (text.empty()) return false;
    char *end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

constexpr size_t kMinChunk = 4096;
constexpr size_t kMaxChunk = size_t{64} << 20;
constexpr size_t kMinShmBytes = size_t{1} << 20;
constexpr size_t kMaxShmBytes = size_t{1} << 40;

} // namespace

Status resolve_settings(const nnpccl_config_t *config, Settings *out) {
    Settings s;
    NNPCCL_TRY(env_int("NNPCCL_TIMEOUT", 1, 86400 * 365, &s.timeout_sec));
    NNPCCL_TRY(env_int("NNPCCL_SHM_SLOTS", 2, 64, &s.shm.slots));
    s.socket.slots = s.shm.slots;
    s.ofi.slots = s.shm.slots;
    if (std::string shm_bytes = env_string("NNPCCL_SHM_BYTES"); !shm_bytes.empty()) {
        auto bytes = parse_size(shm_bytes);
        if (!bytes || *bytes < kMinShmBytes || *bytes > kMaxShmBytes)
            return invalid_argument("NNPCCL_SHM_BYTES=%s is not a size from 1M to 1024G (the shared memory each "
                                    "rank's queues may hold; e.g. 64M)",
                                    shm_bytes.c_str());
        s.shm.bytes = *bytes;
        s.shm.bytes_set = true;
    }
    NNPCCL_TRY(env_int("NNPCCL_SPIN_US", 0, 1000000, &s.spin_us));
    int send_in_place = 1;
    NNPCCL_TRY(env_int("NNPCCL_OFI_SEND_IN_PLACE", 0, 1, &send_in_place));
    s.ofi.send_in_place = send_in_place == 1;
    std::string transport = env_string("NNPCCL_TRANSPORT");
    if (transport == "shm") s.transport = TransportMode::Shm;
    else if (transport == "ofi") s.transport = TransportMode::Ofi;
    else if (transport == "socket") s.transport = TransportMode::Socket;
    else if (!transport.empty() && transport != "auto")
        return invalid_argument("NNPCCL_TRANSPORT=%s is not auto, shm, ofi or socket", transport.c_str());
    std::string net_transport = env_string("NNPCCL_NET_TRANSPORT");
    if (net_transport == "socket") s.net_transport = NetTransport::Socket;
    else if (net_transport == "ofi") s.net_transport = NetTransport::Ofi;
    else if (!net_transport.empty() && net_transport != "auto")
        return invalid_argument("NNPCCL_NET_TRANSPORT=%s is not auto, socket or ofi (what reaches ranks on other hosts)",
                                net_transport.c_str());
    s.planning.topology = env_string("NNPCCL_TOPO");
    s.pin = env_string("NNPCCL_PIN");
    if (std::string net = env_string("NNPCCL_NET"); !net.empty()) {
        const size_t comma = net.find(',');
        if (!number_within(net.substr(0, comma), 1e-3, 1e4, &s.planning.network_gbps) ||
            (comma != std::string::npos &&
             !number_within(net.substr(comma + 1), 0, 1e6, &s.planning.network_latency_us)))
            return invalid_argument("NNPCCL_NET=%s is not GBPS or GBPS,LATENCY_US (the network between hosts: "
                                    "GB/s per direction from 0.001 to 10000, µs from 0 to 1e6; e.g. 1.25,20)",
                                    net.c_str());
    }
    int emulate = 0;
    NNPCCL_TRY(env_int("NNPCCL_EMULATE_LINKS", 0, 1, &emulate));
    s.emulation.links = emulate == 1;
    int tune = 0; // opt-in: measured choices are not reproducible (docs/design.md)
    NNPCCL_TRY(env_int("NNPCCL_TUNE", 0, 1, &tune));
    s.tuning.enabled = tune == 1;
    std::string scale = env_string("NNPCCL_EMULATE_SCALE");
    if (!scale.empty()) {
        char *end = nullptr;
        s.emulation.scale = std::strtod(scale.c_str(), &end);
        if (*end != '\0' || !(s.emulation.scale >= 1e-3 && s.emulation.scale <= 1e6))
            return invalid_argument("NNPCCL_EMULATE_SCALE=%s is not a number from 0.001 to 1e6", scale.c_str());
    }
    s.planning.algorithms = env_string("NNPCCL_ALGO");
    s.planning.tuning_file = env_string("NNPCCL_TUNING_FILE");
    s.trace = env_string("NNPCCL_TRACE"); // whether it can be written is init's check (nnpccl_comm::prepare)
    std::string chunk = env_string("NNPCCL_CHUNK_SIZE");
    if (!chunk.empty()) {
        auto bytes = parse_size(chunk);
        if (!bytes || *bytes < kMinChunk || *bytes > kMaxChunk)
            return invalid_argument("NNPCCL_CHUNK_SIZE=%s is not a size from 4K to 64M", chunk.c_str());
        s.planning.chunk_bytes = *bytes;
    }
    if (config != nullptr) {
        // Fields beyond the caller's struct_size are unknown to it: leave them at their defaults.
        if (config->struct_size < offsetof(nnpccl_config_t, blocking) + sizeof(int) ||
            config->struct_size > (size_t{1} << 16))
            return invalid_argument("config->struct_size=%zu is not sizeof(nnpccl_config_t) (%zu); initialise "
                                    "the config with NNPCCL_CONFIG_INIT",
                                    config->struct_size, sizeof(nnpccl_config_t));
        if (config->timeout_sec < 0) return invalid_argument("config->timeout_sec=%d is negative", config->timeout_sec);
        if (config->timeout_sec > 0) s.timeout_sec = config->timeout_sec;
        if (config->chunk_bytes != 0) {
            if (config->chunk_bytes < kMinChunk || config->chunk_bytes > kMaxChunk)
                return invalid_argument("config->chunk_bytes=%zu is not from 4096 to 64M", config->chunk_bytes);
            s.planning.chunk_bytes = config->chunk_bytes;
            s.planning.chunk_source = "config->chunk_bytes";
        }
        if (config->blocking != 0 && config->blocking != 1)
            return invalid_argument("config->blocking=%d is not 0 (init returns at once) or 1 (init returns when "
                                    "the communicator is ready)",
                                    config->blocking);
        s.blocking = config->blocking == 1;
        if (config->struct_size >= offsetof(nnpccl_config_t, algorithms) + sizeof(config->algorithms) &&
            config->algorithms != nullptr) {
            s.planning.algorithms = config->algorithms;
            s.planning.algorithms_source = "config->algorithms";
        }
    }
    s.planning.chunk_bytes &= ~size_t{63}; // keeps every slot cache-line aligned
    *out = s;
    return Status::ok();
}

} // namespace nnpccl
