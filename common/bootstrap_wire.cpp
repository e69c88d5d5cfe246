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
    if (h.type < static_cast<uint32_t>(FrameType::Hello) || h.type > static_cast<uint32_t>(FrameType::Answer))
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

uint64_t siphash24(const JobSecret &key, const void *data, size_t length) {
    auto rotl = [](uint64_t x, int b) { return (x << b) | (x >> (64 - b)); };
    auto load_le = [](const uint8_t *p, size_t n) {
        uint64_t v = 0;
        for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
        return v;
    };
    const uint64_t k0 = load_le(key.data(), 8), k1 = load_le(key.data() + 8, 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    auto rounds = [&](int n) {
        for (int i = 0; i < n; ++i) {
            v0 += v1;
            v1 = rotl(v1, 13) ^ v0;
            v0 = rotl(v0, 32);
            v2 += v3;
            v3 = rotl(v3, 16) ^ v2;
            v0 += v3;
            v3 = rotl(v3, 21) ^ v0;
            v2 += v1;
            v1 = rotl(v1, 17) ^ v2;
            v2 = rotl(v2, 32);
        }
    };
    const auto *bytes = static_cast<const uint8_t *>(data);
    size_t whole = length - length % 8;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = load_le(bytes + i, 8);
        v3 ^= m;
        rounds(2);
        v0 ^= m;
    }
    uint64_t last = (static_cast<uint64_t>(length) << 56) | load_le(bytes + whole, length - whole);
    v3 ^= last;
    rounds(2);
    v0 ^= last;
    v2 ^= 0xff;
    rounds(4);
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t job_proof(const JobSecret &secret, ProofOf what, const Hello &hello, const Nonce &challenge) {
    std::string message = what == ProofOf::Hello     ? "nnpccl hello"
                          : what == ProofOf::Welcome ? "nnpccl welcome"
                                                     : "nnpccl answer";
    message.append(reinterpret_cast<const char *>(&hello.rank), sizeof hello.rank);
    message.append(reinterpret_cast<const char *>(&hello.nranks), sizeof hello.nranks);
    message.append(reinterpret_cast<const char *>(hello.nonce), sizeof hello.nonce);
    message.append(reinterpret_cast<const char *>(&hello.setup_ms), sizeof hello.setup_ms);
    if (what != ProofOf::Hello) message.append(reinterpret_cast<const char *>(challenge.data()), challenge.size());
    return siphash24(secret, message.data(), message.size());
}

Status make_hello(const JobSecret &secret, int rank, int nranks, uint32_t setup_ms, Hello *out) {
    *out = Hello{};
    out->rank = static_cast<uint32_t>(rank);
    out->nranks = static_cast<uint32_t>(nranks);
    out->setup_ms = setup_ms;
    NNPCCL_TRY(random_bytes(out->nonce, sizeof out->nonce));
    out->proof = job_proof(secret, ProofOf::Hello, *out);
    return Status::ok();
}

namespace {

bool proofs_equal(uint64_t a, uint64_t b) { // constant time
    uint64_t diff = a ^ b;
    diff |= diff >> 32;
    diff |= diff >> 16;
    diff |= diff >> 8;
    return (diff & 0xff) == 0;
}

} // namespace

bool hello_is_genuine(const JobSecret &secret, const Hello &hello) {
    return proofs_equal(hello.proof, job_proof(secret, ProofOf::Hello, hello));
}

std::string encode_welcome(const JobSecret &secret, const Hello &hello, const Nonce &challenge) {
    Welcome welcome{};
    welcome.proof = job_proof(secret, ProofOf::Welcome, hello, challenge);
    std::memcpy(welcome.challenge, challenge.data(), challenge.size());
    return encode_frame(FrameType::Welcome, &welcome, sizeof welcome);
}

bool welcome_is_genuine(const JobSecret &secret, const Hello &hello, const std::string &payload, Nonce *challenge) {
    Welcome welcome{};
    if (payload.size() != sizeof welcome) return false;
    std::memcpy(&welcome, payload.data(), sizeof welcome);
    Nonce offered;
    std::memcpy(offered.data(), welcome.challenge, offered.size());
    if (!proofs_equal(welcome.proof, job_proof(secret, ProofOf::Welcome, hello, offered))) return false;
    *challenge = offered;
    return true;
}

std::string encode_answer(const JobSecret &secret, const Hello &hello, const Nonce &challenge) {
    Answer answer{job_proof(secret, ProofOf::Answer, hello, challenge)};
    return encode_frame(FrameType::Answer, &answer, sizeof answer);
}

bool answer_is_genuine(const JobSecret &secret, const Hello &hello, const Nonce &challenge,
                       const std::string &payload) {
    Answer answer{};
    if (payload.size() != sizeof answer) return false;
    std::memcpy(&answer, payload.data(), sizeof answer);
    return proofs_equal(answer.proof, job_proof(secret, ProofOf::Answer, hello, challenge));
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

Status random_secret(JobSecret *out) { return random_bytes(out->data(), out->size()); }

Status random_bytes(void *out, size_t length) {
    auto *bytes = static_cast<uint8_t *>(out);
    size_t got = 0;
    while (got < length) {
        ssize_t n = getrandom(bytes + got, length - got, 0);
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
