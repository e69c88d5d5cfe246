#include "copy.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

namespace nnpccl {

void copy_bytes_by_vectors(void *dst, const void *src, size_t bytes) {
    auto *to = static_cast<unsigned char *>(dst);
    const auto *from = static_cast<const unsigned char *>(src);
#if defined(__x86_64__) || defined(__i386__)
    // SSE2, the baseline: the loop stays out of memcpy (a compiler may turn
    // a plain byte loop back into a call to it).
    for (; bytes >= 64; bytes -= 64, to += 64, from += 64) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + 32));
        const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + 48));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(to), a);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(to + 16), b);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(to + 32), c);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(to + 48), d);
    }
#endif
    std::memcpy(to, from, bytes);
}

} // namespace nnpccl
