// Which sanitizer this test program is built under (GCC defines
// __SANITIZE_*__, clang answers __has_feature), for the tests that must
// leave a part to other builds: NNPCCL_TEST_ASAN and NNPCCL_TEST_TSAN for
// the preprocessor, kAddressSanitizer and kThreadSanitizer for code.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define NNPCCL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NNPCCL_TEST_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define NNPCCL_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NNPCCL_TEST_TSAN 1
#endif
#endif

#ifdef NNPCCL_TEST_ASAN
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#ifdef NNPCCL_TEST_TSAN
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
