// Whether this test binary runs under AddressSanitizer: GCC defines __SANITIZE_ADDRESS__, clang
// answers __has_feature(address_sanitizer). Memory (RSS) bounds mean nothing there (shadow memory,
// quarantine) and wall-time bounds stretch (-O0 and instrumented loads).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define KAMERA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KAMERA_TEST_ASAN 1
#endif
#endif

namespace test_sanitizer {
#if defined(KAMERA_TEST_ASAN)
constexpr bool kAsan = true;
constexpr double kTimeScale = 3.0;  // wall-time bounds under ASan (-O0)
#else
constexpr bool kAsan = false;
constexpr double kTimeScale = 1.0;
#endif
}  // namespace test_sanitizer
