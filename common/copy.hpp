// copy_bytes(): memcpy for the data path, without the copy distances that
// make `rep movsb` crawl.
//
// On AMD Zen 4 `rep movsb` runs at a tenth or less of its speed when the
// destination lies 1 to 15 bytes past the source modulo 4 KiB
// (bench/micro-kernels, BM_copy; docs/performance.md, "Copy distances").
// glibc's memcpy uses it for copies from a few KiB up, and checks only
// distances below 64 bytes, not modulo 4 KiB; the kernel's copies to and
// from user memory (send(2), recv(2)) use it too. Whether a copy hits it
// depends on where two buffers happen to lie, so the same call is ten
// times slower or not depending on its buffers' addresses. copy_bytes()
// moves those copies with vector loads and stores instead; every other
// copy is memcpy's. The socket transport keeps the kernel's copies off
// those distances by where it puts payloads in the stream
// (transports/socket/socket_transport.cpp, "Frames").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nnpccl {

// Whether a copy from `src` to `dst` lands at a distance `rep movsb` crawls at.
inline bool slow_copy_distance(const void *dst, const void *src) {
    const uintptr_t gap = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
    return gap >= 1 && gap <= 15;
}

// The copy for those distances: 64 bytes a turn through vector registers.
void copy_bytes_by_vectors(void *dst, const void *src, size_t bytes);

// memcpy(dst, src, bytes), the buffers not overlapping.
inline void copy_bytes(void *dst, const void *src, size_t bytes) {
    // Below a few KiB memcpy uses vector loops anyway (glibc's
    // rep_movsb_threshold is 2 KiB and up).
    if (bytes >= 2048 && slow_copy_distance(dst, src)) copy_bytes_by_vectors(dst, src, bytes);
    else std::memcpy(dst, src, bytes);
}

} // namespace nnpccl
