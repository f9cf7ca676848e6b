// Block layouts of ggml's quantized types, bit for bit as GGUF files store them, and the small
// decoders their scales need. Shared by the scalar references (ops/quant_ref.cpp) and the fast
// paths; everything here has internal linkage (static), so the copies compiled with AVX2 or
// AVX-512 flags never replace the baseline ones at link time.
//
// Per block of 32 (legacy types):       value
//   q4_0   f16 d, u8 qs[16]                d * (nibble - 8)
//   q4_1   f16 d, f16 m, u8 qs[16]         d * nibble + m
//   q5_0   f16 d, u8 qh[4], u8 qs[16]      d * (nibble | bit << 4) - 16 d
//   q5_1   f16 d, f16 m, u8 qh[4], qs[16]  d * (nibble | bit << 4) + m
//   q8_0   f16 d, i8 qs[32]                d * q
//   iq4_nl f16 d, u8 qs[16]                d * kIq4nlValues[nibble]
//   mxfp4  u8 e (E8M0), u8 qs[16]          2^(e - 128) * kMxfp4Values[nibble] (E2M1, doubled)
// In qs[j] the low nibble is value j and the high nibble value j + 16; bit j of qh (a
// little-endian u32) is the fifth bit of value j.
//
// Per super-block of 256 (k-quants), sub-blocks of 16 or 32 values with quantized scales:
//   q2_K  u8 scales[16] (low nibble scale, high nibble min), u8 qs[64] (2 bits), f16 d, f16 dmin
//   q3_K  u8 hmask[32], u8 qs[64], u8 scales[12] (16 six-bit scales, offset 32), f16 d
//   q4_K  f16 d, f16 dmin, u8 scales[12] (8 six-bit scales and 8 mins), u8 qs[128]
//   q5_K  f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]
//   q6_K  u8 ql[128], u8 qh[64], i8 scales[16], f16 d
//   iq4_xs f16 d, u16 scales_h, u8 scales_l[4], u8 qs[128]
// Activation blocks of the integer dot products:
//   q8_1  f16 d, f16 s (= d * sum of qs), i8 qs[32]
//   q8_K  f32 d, i8 qs[256], i16 bsums[16] (sums of qs in groups of 16)
#pragma once

#include <cstdint>
#include <cstring>

#include "core/ggml_type.h"

namespace kamera::quant {

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ8_1 {
  uint16_t d, s;
  int8_t qs[32];
};
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockMxfp4 {
  uint8_t e;  // E8M0 exponent: the block's scale is 2^(e - 127)
  uint8_t qs[16];
};
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36 &&
              sizeof(BlockIq4Nl) == 18 && sizeof(BlockMxfp4) == 17);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockIq4Xs) == 136 &&
              sizeof(BlockQ8_K) == 292);

// The 16 non-uniform levels of iq4_nl and iq4_xs.
alignas(16) static constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                        1,    13,   25,  38,  53,  69,  89,  113};

// The 16 E2M1 values of mxfp4 times 2 (sign bit 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6), so that
// they are integers; the block scale is halved to match (mxfp4_half_scale).
alignas(16) static constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                                        0, -1, -2, -3, -4, -6, -8, -12};

// Half the scale of an mxfp4 block, 2^(e - 128), built as float bits (exact, subnormal for e < 2).
static inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e - 1) << 23);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The 32 fifth bits of a q5_0 / q5_1 block as a u32 (bit j belongs to value j).
static inline uint32_t q5_high_bits(const uint8_t qh[4]) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return h;
}

// Scale and min of sub-block j (0..7) of a q4_K / q5_K super-block: 6 bits each. Sub-blocks 0-3
// keep theirs in the low 6 bits of bytes j (scale) and j + 4 (min); sub-blocks 4-7 take the low
// 4 bits from byte j + 4 and the top 2 bits from the spare top bits of bytes j - 4 (scale) and j
// (min).
static inline void k4_scale_min(const uint8_t s[12], int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Signed scale of sub-block i (0..15) of a q3_K super-block: low 4 bits from byte i (i < 8) or
// the high nibble of byte i - 8, top 2 bits from byte 8 + i % 4 at bit 2 * (i / 4); minus 32.
static inline int q3_scale(const uint8_t s[12], int i) {
  const int low = i < 8 ? (s[i] & 0x0f) : (s[i - 8] >> 4);
  const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Signed scale of sub-block i (0..7) of an iq4_xs super-block: 4 low bits from scales_l, 2 high
// bits from scales_h; minus 32.
static inline int iq4xs_scale(const BlockIq4Xs& b, int i) {
  const int low = (b.scales_l[i / 2] >> (4 * (i % 2))) & 0x0f;
  const int high = (b.scales_h >> (2 * i)) & 3;
  return (low | (high << 4)) - 32;
}

// The dot (activation) type a weight type multiplies against in the integer kernels: q8_0 for
// q4_0, q5_0, q8_0, iq4_nl and mxfp4; q8_1 for q4_1 and q5_1 (their min needs the activation sum);
// q8_K for the k-quants and iq4_xs; f32 for the float types.
static inline GgmlType dot_type_of(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4:
      return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return GgmlType::Q8_1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS:
      return GgmlType::Q8_K;
    default:
      return GgmlType::F32;
  }
}

}  // namespace kamera::quant
