#include "bootstrap_wire.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

namespace nnpccl {

namespace {

constexpr uint32_t kIdMagic = 0x4e4e5055; // "NNPU"
constexpr uint8_t kIdVersion = 1;

struct PackedId {
    uint32_t magic;
    uint8_t version;
    uint8_t family;
    uint16_t port;
    uint8_t addr[16];
    uint8_t secret[16];
};
static_assert(sizeof(PackedId) <= NNPCCL_UNIQUE_ID_BYTES);

} // namespace

std::string encode_frame(FrameType type, const void *payload, size_t length) {
    FrameHeader h{kFrameMagic, static_cast<uint32_t>(type), length};
    std::string out(reinterpret_cast<const char *>(&h), sizeof h);
    if (length > 0) out.append(static_cast<const char *>(payload), length);
    return out;
}

Status check_frame_header(const FrameHeader &h, size_t max_length) {
    if (h.magic != kFrameMagic) return invalid_usage("bootstrap frame has a bad magic number 0x%08x", h.magic);
    if (h.type < static_cast<uint32_t>(FrameType::Hello) || h.type > static_cast<uint32_t>(FrameType::Failure))
        return invalid_usage("bootstrap frame has an unknown type %u", h.type);
    if (h.length > max_length)
        return invalid_usage("bootstrap frame of %llu bytes exceeds the limit of %zu",
                             static_cast<unsigned long long>(h.length), max_length);
    return Status::ok();
}

std::string encode_failure(nnpccl_result_t code, const std::string &message) {
    uint32_t c = static_cast<uint32_t>(code);
    return std::string(reinterpret_cast<const char *>(&c), sizeof c) + message;
}

Status decode_failure(const std::string &payload) {
    uint32_t c = NNPCCL_ERR_REMOTE;
    if (payload.size() >= sizeof c) std::memcpy(&c, payload.data(), sizeof c);
    std::string message = payload.size() >= sizeof c ? payload.substr(sizeof c) : payload;
    if (message.empty()) message = "a peer reported a failure without a reason";
    // Only the codes a failure can carry; anything else reads as a remote failure.
    nnpccl_result_t code = c == NNPCCL_ERR_INVALID_USAGE || c == NNPCCL_ERR_TIMEOUT ? static_cast<nnpccl_result_t>(c)
                                                                                     : NNPCCL_ERR_REMOTE;
    return Status(code, message);
}

Status decode_hello(const std::string &payload, Hello *out) {
    if (payload.size() != sizeof(Hello))
        return invalid_usage("hello message has %zu bytes, expected %zu", payload.size(), sizeof(Hello));
    std::memcpy(out, payload.data(), sizeof(Hello));
    if (out->nranks < 1 || out->nranks > static_cast<uint32_t>(kMaxRanks))
        return invalid_usage("hello message names %u ranks (limit %d)", out->nranks, kMaxRanks);
    if (out->rank >= out->nranks)
        return invalid_usage("hello message names rank %u of %u", out->rank, out->nranks);
    return Status::ok();
}

std::string encode_gather_result(const std::vector<std::string> &parts) {
    std::string out;
    uint32_t n = static_cast<uint32_t>(parts.size());
    out.append(reinterpret_cast<const char *>(&n), sizeof n);
    for (const std::string &part : parts) {
        uint32_t len = static_cast<uint32_t>(part.size());
        out.append(reinterpret_cast<const char *>(&len), sizeof len);
        out.append(part);
    }
    return out;
}

Status decode_gather_result(const std::string &payload, int nranks, std::vector<std::string> *parts) {
    size_t pos = 0;
    auto take_u32 = [&](uint32_t *v) {
        if (payload.size() - pos < sizeof *v) return false;
        std::memcpy(v, payload.data() + pos, sizeof *v);
        pos += sizeof *v;
        return true;
    };
    uint32_t n = 0;
    if (!take_u32(&n) || n != static_cast<uint32_t>(nranks))
        return invalid_usage("allgather result holds %u parts, expected %d", n, nranks);
    parts->assign(n, std::string());
    for (uint32_t i = 0; i < n; ++i) {
        uint32_t len = 0;
        if (!take_u32(&len) || len > kMaxRankPayload || payload.size() - pos < len)
            return invalid_usage("allgather result is truncated at part %u", i);
        (*parts)[i].assign(payload.data() + pos, len);
        pos += len;
    }
    if (pos != payload.size()) return invalid_usage("allgather result has %zu trailing bytes", payload.size() - pos);
    return Status::ok();
}

void encode_unique_id(const UniqueId &id, nnpccl_unique_id_t *out) {
    std::memset(out, 0, sizeof *out);
    PackedId packed{};
    packed.magic = kIdMagic;
    packed.version = kIdVersion;
    packed.family = static_cast<uint8_t>(id.root.family());
    packed.port = id.root.port();
    if (id.root.family() == AF_INET)
        std::memcpy(packed.addr, &reinterpret_cast<const sockaddr_in *>(&id.root.storage)->sin_addr, 4);
    else
        std::memcpy(packed.addr, &reinterpret_cast<const sockaddr_in6 *>(&id.root.storage)->sin6_addr, 16);
    std::memcpy(packed.secret, id.secret.data(), id.secret.size());
    std::memcpy(out->internal, &packed, sizeof packed);
}

Status decode_unique_id(const nnpccl_unique_id_t &in, UniqueId *out) {
    PackedId packed;
    std::memcpy(&packed, in.internal, sizeof packed);
    if (packed.magic != kIdMagic || packed.version != kIdVersion)
        return invalid_argument("unique id was not made by nnpccl_get_unique_id (bad magic or version)");
    if (packed.port == 0) return invalid_argument("unique id holds port 0");
    *out = UniqueId{};
    if (packed.family == AF_INET) {
        auto *v4 = reinterpret_cast<sockaddr_in *>(&out->root.storage);
        v4->sin_family = AF_INET;
        std::memcpy(&v4->sin_addr, packed.addr, 4);
        out->root.length = sizeof(sockaddr_in);
    } else if (packed.family == AF_INET6) {
        auto *v6 = reinterpret_cast<sockaddr_in6 *>(&out->root.storage);
        v6->sin6_family = AF_INET6;
        std::memcpy(&v6->sin6_addr, packed.addr, 16);
        out->root.length = sizeof(sockaddr_in6);
    } else {
        return invalid_argument("unique id holds an unknown address family %u", packed.family);
    }
    out->root.set_port(packed.port);
    std::memcpy(out->secret.data(), packed.secret, out->secret.size());
    return Status::ok();
}

Status random_secret(JobSecret *out) {
    size_t got = 0;
    while (got < out->size()) {
        ssize_t n = getrandom(out->data() + got, out->size() - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno_error("getrandom");
        }
        got += static_cast<size_t>(n);
    }
    return Status::ok();
}

bool secrets_equal(const JobSecret &a, const JobSecret &b) {
    uint8_t diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
    return diff == 0;
}

} // namespace nnpccl
