// The socket transport's wire: how a stream of messages lies on a TCP
// connection (frames, each an aligned head and a payload padded to the
// next line) and the hello a connection opens with. Apart from the
// transport's state and pumps so that what the two ends must agree on,
// byte for byte, is read in one place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nnpccl {

// What a frame carries. Signs of life and the farewell mean what they mean
// in the ofi transport (see check_peers() and flush()); the hello is a
// connection's first frame.
enum FrameKind : uint32_t { kData = 0, kBeat = 1, kFarewell = 2, kHello = 3 };
struct FrameHead {
    uint32_t bytes; // of payload
    uint32_t kind;
};
static_assert(sizeof(FrameHead) == 8, "a frame head is 8 bytes on the wire");
struct StreamHello {
    uint64_t token; // the receiver's listener's, as the bootstrap gave it
    uint32_t rank;
    uint32_t channel;
};

// Frames: each starts at a multiple of kFrameAlign bytes into its stream.
// Its head, zero-filled, takes kFrameAlign bytes, and zeros after the
// payload fill it up to the next multiple. The kernel copies what is sent
// into its buffers in stream order, starting each page afresh at offset
// 0, so a payload starts 64-byte aligned there; its copies to and from
// 16-byte aligned user memory then never run at the distances where `rep
// movsb` (which the kernel copies with) crawls (common/copy.hpp; the
// 8-byte heads before did, docs/performance.md, "Copy distances").
// Memory that is not 16-byte aligned goes through the slots, whose copies
// avoid those distances themselves.
constexpr size_t kFrameAlign = 64;
constexpr size_t kHeadBytes = kFrameAlign;
static_assert(sizeof(FrameHead) <= kHeadBytes, "a frame head fits its padded place");
constexpr size_t tail_bytes(size_t payload) { return (kFrameAlign - payload % kFrameAlign) % kFrameAlign; }
constexpr size_t frame_bytes(size_t payload) { return kHeadBytes + payload + tail_bytes(payload); }
constexpr size_t kHelloFrameBytes = frame_bytes(sizeof(StreamHello));
constexpr unsigned char kZeros[kFrameAlign] = {};
inline bool user_aligned(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Appends a whole frame of `kind` (head, payload, padding) to `to`.
inline void append_frame(std::string *to, FrameKind kind, const void *payload, uint32_t bytes) {
    const FrameHead head{bytes, kind};
    to->append(reinterpret_cast<const char *>(&head), sizeof head);
    to->append(kHeadBytes - sizeof head, '\0');
    if (bytes > 0) to->append(static_cast<const char *>(payload), bytes);
    to->append(tail_bytes(bytes), '\0');
}

} // namespace nnpccl
