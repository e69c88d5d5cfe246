// The bootstrap's wire format, shared by the root and the ranks, and the
// layout of nnpccl_unique_id_t. Everything read from the network goes
// through the decoders here, which check every length before using it.
//
// Frame: magic u32 | type u32 | payload length u64 | payload (host byte
// order: all ranks of a job share an architecture).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nnpccl.h"
#include "socket.hpp"
#include "status.hpp"

namespace nnpccl {

using JobSecret = std::array<uint8_t, 16>;
using Nonce = std::array<uint8_t, 16>;

constexpr uint32_t kFrameMagic = 0x4e4e5042; // "NNPB"
constexpr size_t kFrameHeaderBytes = 16;
constexpr size_t kMaxRankPayload = 64 * 1024;
constexpr int kMaxRanks = 1 << 16;

enum class FrameType : uint32_t {
    Hello = 1,        // rank -> root: rank, nranks, a nonce and the proof that it holds the job secret
    Gather = 2,       // rank -> root: this rank's part of an allgather
    GatherResult = 3, // root -> rank: every rank's part, in rank order
    Error = 4,        // root -> rank: the job cannot go on; payload: result code (u32), then the reason
    Goodbye = 5,      // rank -> root: this rank leaves cleanly (destroy), do not report it as dead
    Failure = 6,      // rank -> root: this rank's communicator failed; payload as Error, relayed to all
    Welcome = 7,      // root -> rank, first: the root's proof that it holds the job secret, and a challenge
    Answer = 8,       // rank -> root, after the welcome: the rank's proof over the root's challenge
};

// Error and Failure payloads: a result code and a message.
std::string encode_failure(nnpccl_result_t code, const std::string &message);
Status decode_failure(const std::string &payload);

struct FrameHeader {
    uint32_t magic;
    uint32_t type;
    uint64_t length;
};
static_assert(sizeof(FrameHeader) == kFrameHeaderBytes);

// The secret never crosses the network: each side proves it holds it with
// a keyed hash (SipHash-2-4, keyed by the secret), so a stranger listening
// at the root's address learns nothing it could join with, and a rank
// trusts no frame until the root has proved it is this job's root.
//
//   rank -> root  Hello:   rank, nranks, the rank's fresh nonce, proof
//   root -> rank  Welcome: proof over the hello, the root's fresh challenge
//   rank -> root  Answer:  proof over the hello and the challenge
//
// The hello's own proof lets the root drop strangers before spending a
// challenge on them; the answer is what admits the rank. A hello recorded
// from another connection (of this run or an earlier one with the same
// secret) can be sent again, but its answer was made for another
// challenge: the root refuses it without disturbing the job, and the
// recorded allgather parts that follow it are never read. Distinct labels
// keep one proof from serving as another.
struct Hello {
    uint32_t rank;
    uint32_t nranks;
    uint8_t nonce[16];
    // Milliseconds left of the rank's set-up (init) deadline as it says
    // hello. The root gives up on a set-up step a little before the
    // earliest of them, naming the ranks that never came (bootstrap_root.cpp),
    // rather than let every rank time out on its own; so every allgather
    // and barrier of the bootstrap belongs to init.
    uint32_t setup_ms;
    uint32_t reserved; // zero
    uint64_t proof;    // job_proof(secret, Hello, hello)
};
static_assert(sizeof(Hello) == 40);

struct Welcome {
    uint64_t proof;        // job_proof(secret, Welcome, hello, challenge)
    uint8_t challenge[16]; // fresh for each connection
};
static_assert(sizeof(Welcome) == 24);

struct Answer {
    uint64_t proof; // job_proof(secret, Answer, hello, challenge)
};

enum class ProofOf { Hello, Welcome, Answer };
// `challenge` is left out of the hello's proof (the rank has none yet).
uint64_t job_proof(const JobSecret &secret, ProofOf what, const Hello &hello, const Nonce &challenge = Nonce{});
// With a fresh nonce.
Status make_hello(const JobSecret &secret, int rank, int nranks, uint32_t setup_ms, Hello *out);

std::string encode_frame(FrameType type, const void *payload, size_t length);

// Checks a received header: magic, a known type, and a length no larger than
// max_length. The message names what was wrong.
Status check_frame_header(const FrameHeader &h, size_t max_length);

Status decode_hello(const std::string &payload, Hello *out);
// Whether `hello` proves knowledge of `secret`.
bool hello_is_genuine(const JobSecret &secret, const Hello &hello);
// The root's answer to a genuine hello, with the challenge it must answer (a frame).
std::string encode_welcome(const JobSecret &secret, const Hello &hello, const Nonce &challenge);
// Whether the welcome's payload answers `hello` under `secret`; if so, its challenge.
bool welcome_is_genuine(const JobSecret &secret, const Hello &hello, const std::string &payload, Nonce *challenge);
// The rank's answer to the challenge (a frame), and the root's check of its payload.
std::string encode_answer(const JobSecret &secret, const Hello &hello, const Nonce &challenge);
bool answer_is_genuine(const JobSecret &secret, const Hello &hello, const Nonce &challenge, const std::string &payload);

// SipHash-2-4 of `data` under the 128-bit `key` (Aumasson and Bernstein, 2012).
uint64_t siphash24(const JobSecret &key, const void *data, size_t length);

std::string encode_gather_result(const std::vector<std::string> &parts);
Status decode_gather_result(const std::string &payload, int nranks, std::vector<std::string> *parts);

// The unique id: where the root listens and the job's secret.
struct UniqueId {
    SockAddr root;
    JobSecret secret{};
};
void encode_unique_id(const UniqueId &id, nnpccl_unique_id_t *out);
Status decode_unique_id(const nnpccl_unique_id_t &in, UniqueId *out);

Status random_secret(JobSecret *out);
Status random_bytes(void *out, size_t length);
bool secrets_equal(const JobSecret &a, const JobSecret &b); // constant time

} // namespace nnpccl
