// The ofi transport's wire: how a message's tag names its sender, channel
// and place in its stream, and the bits above them that mark signs of
// life, farewells and the two halves of a split message. Apart from the
// transport's state and progress so that what every rank must read alike
// is in one place.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace nnpccl {

constexpr int kSeqBits = 40;
constexpr int kChannelBits = 4;
constexpr uint64_t kSeqMask = (uint64_t{1} << kSeqBits) - 1;

inline uint64_t make_tag(int src_rank, int channel, uint64_t seq) {
    return (static_cast<uint64_t>(src_rank) << (kSeqBits + kChannelBits)) |
           (static_cast<uint64_t>(channel) << kSeqBits) | (seq & kSeqMask);
}

// Signs of life (see check_peers()) are empty messages whose tag has this
// bit, above the 60 bits of a data tag, and the sender's rank where data
// tags have it; so one receive that ignores every other bit takes them from
// every peer, and neither kind of receive can take the other's messages.
constexpr uint64_t kBeatBit = uint64_t{1} << 60;
constexpr uint64_t kBeatIgnore = ~kBeatBit;
// With this bit too, the sign of life is a farewell: the sender destroyed its
// communicator cleanly, and its silence from then on is no fault.
constexpr uint64_t kFarewellBit = uint64_t{1} << 61;
// A message sent in place whose header fits an inject goes as two: the
// header (the slot's bytes, then the payload's length) under the stream's
// tag with kSplitBit, which the receive posted for the stream's next
// message takes whether the bit is there or not, and the payload under the
// same tag with kPayloadBit instead, which nothing takes until the receiver
// posts a receive for it. So the receiver chooses where the payload lands
// once it has the header: straight in the caller's buffer when the step
// only stores it (Transport::try_peek_recv_into), one copy fewer, else in
// the slot behind the header, where a message sent whole would be. Until
// then the payload waits in the socket, and the connection with it, so
// only a header that is its stream's next message waits, at most
// kClaimWindow, for its step to claim the payload; one behind others goes
// to the slot at once, as the step that will take it may be far behind
// (a large allreduce's receiver, reducing). The wait is bounded, so a
// stalled connection never holds up whatever the step itself waits for.
// Splitting costs a few µs a message (an inject more, a turn of progress
// before the payload is read); the copy it saves pays for that from
// kSplitMinBytes (docs/performance.md, "TCP: payloads received in place").
constexpr uint64_t kSplitBit = uint64_t{1} << 62;
constexpr size_t kSplitMinBytes = 256 * 1024;
constexpr uint64_t kPayloadBit = uint64_t{1} << 63;
constexpr auto kClaimWindow = std::chrono::microseconds(100);

inline int beat_sender(uint64_t tag) { return static_cast<int>((tag >> (kSeqBits + kChannelBits)) & 0xffff); }

} // namespace nnpccl
