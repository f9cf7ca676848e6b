// f16 / bf16 / q8_0 conversions against independent references: the CPU's F16C instructions
// (when present), exhaustive round trips, and the definitions of the formats.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/cpu_features.h"
#include "core/dtype.h"

using namespace kamera;

namespace {

__attribute__((target("f16c"))) float hw_f16_to_f32(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(int16_t(h))));
}
__attribute__((target("f16c"))) uint16_t hw_f32_to_f16(float f) {
  return uint16_t(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
bool have_f16c() {
  return kamera::cpu_features().f16c;  // cpuid, with the OS's AVX state check
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

TEST(DType, F16ToF32AllValuesMatchHardware) {
  if (!have_f16c()) GTEST_SKIP() << "this CPU has no F16C instructions to compare against";
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = f16_to_f32(uint16_t(h)), b = hw_f16_to_f32(uint16_t(h));
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(a)) << h;
    } else {
      ASSERT_EQ(bits(a), bits(b)) << "half 0x" << std::hex << h;
    }
  }
}

TEST(DType, F32ToF16RoundsLikeHardware) {
  if (!have_f16c()) GTEST_SKIP() << "this CPU has no F16C instructions to compare against";
  std::mt19937 rng(1);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = rng();
    if (i % 2) u = (u & 0x8000ffffu) | ((100 + rng() % 60) << 23);  // focus on the f16 range
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), hw_f32_to_f16(f)) << "f32 bits 0x" << std::hex << u;
  }
  // ties, overflow, subnormals
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e9f, -1e9f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 6.1e-5f,
                  1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 0.0f, -0.0f, INFINITY})
    EXPECT_EQ(f32_to_f16(f), hw_f32_to_f16(f)) << f;
}

TEST(DType, Bf16IsTheUpperHalfRoundedToNearestEven) {
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    const float f = bf16_to_f32(uint16_t(hi));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), hi);  // exact values round-trip
  }
  // halfway cases: round to even
  EXPECT_EQ(f32_to_bf16(bf16_to_f32(0x3f80) + std::ldexp(1.0f, -8)), 0x3f80);  // 1 + half ulp
  EXPECT_EQ(f32_to_bf16(bf16_to_f32(0x3f81) + std::ldexp(1.0f, -8)), 0x3f82);
  float nan = std::nanf("");
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(nan))));
}

TEST(DType, Q8_0RoundTripWithinHalfStep) {
  std::mt19937 rng(2);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> x(32 * 50), y(x.size());
  for (auto& v : x) v = d(rng);
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
  std::vector<uint8_t> q(dtype_row_bytes(DType::Q8_0, int64_t(x.size())));
  EXPECT_EQ(q.size(), 50u * 34u);
  quantize_row(DType::Q8_0, x.data(), q.data(), int64_t(x.size()));
  dequantize_row(DType::Q8_0, q.data(), y.data(), int64_t(x.size()));
  for (int b = 0; b < 50; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    // quants are picked with the exact step, the scale is stored as f16 (as ggml does)
    const float step = amax / 127.0f, stored = f16_to_f32(f32_to_f16(step));
    const float bound = 0.5f * step + 127.0f * std::fabs(step - stored) + 1e-6f;
    for (int j = 0; j < 32; ++j) EXPECT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound);
  }
  for (int j = 32; j < 64; ++j) EXPECT_EQ(y[j], 0.0f);
}

TEST(DType, Names) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0})
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  EXPECT_FALSE(dtype_from_name("q4_0").has_value());
}
