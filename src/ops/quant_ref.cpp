// Scalar references (see quant_ref.h). Each type decodes one block at a time into its integer
// quants and the scales that multiply them, written out the way the block layout reads.
#include "ops/quant_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "core/status.h"
#include "ops/quant_blocks.h"

namespace kamera::quant {

namespace {

float h2f(uint16_t h) {
  return f16_to_f32(h);
}

template <class Block>
const Block* blocks(const void* p) {
  return static_cast<const Block*>(p);
}

// --- per block: value i of the block -----------------------------------------------------------

void deq_q4_0(const BlockQ4_0& b, float* y) {
  const float d = h2f(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float((b.qs[j] & 0x0f) - 8);
    y[j + 16] = d * float((b.qs[j] >> 4) - 8);
  }
}

void deq_q4_1(const BlockQ4_1& b, float* y) {
  const float d = h2f(b.d), m = h2f(b.m);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(b.qs[j] & 0x0f) + m;
    y[j + 16] = d * float(b.qs[j] >> 4) + m;
  }
}

// Quant j (0..31) of a q5 block, 0..31.
int q5_quant(const uint8_t qs[16], uint32_t qh, int j) {
  const int nib = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
  return nib | int((qh >> j) & 1) << 4;
}

void deq_q5_0(const BlockQ5_0& b, float* y) {
  const float d = h2f(b.d);
  const uint32_t qh = q5_high_bits(b.qh);
  for (int j = 0; j < 32; ++j) y[j] = d * float(q5_quant(b.qs, qh, j) - 16);
}

void deq_q5_1(const BlockQ5_1& b, float* y) {
  const float d = h2f(b.d), m = h2f(b.m);
  const uint32_t qh = q5_high_bits(b.qh);
  for (int j = 0; j < 32; ++j) y[j] = d * float(q5_quant(b.qs, qh, j)) + m;
}

void deq_q8_0(const BlockQ8_0& b, float* y) {
  const float d = h2f(b.d);
  for (int j = 0; j < 32; ++j) y[j] = d * float(b.qs[j]);
}

void deq_iq4_nl(const BlockIq4Nl& b, float* y) {
  const float d = h2f(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(kIq4nlValues[b.qs[j] & 0x0f]);
    y[j + 16] = d * float(kIq4nlValues[b.qs[j] >> 4]);
  }
}

void deq_mxfp4(const BlockMxfp4& b, float* y) {
  const float d = mxfp4_half_scale(b.e);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(kMxfp4Values[b.qs[j] & 0x0f]);
    y[j + 16] = d * float(kMxfp4Values[b.qs[j] >> 4]);
  }
}

// q2_K / q3_K: value v of the super-block sits in byte 32 * (v / 128) + v % 32 of qs, at bit
// 2 * ((v % 128) / 32).
int q2_bits(const uint8_t qs[64], int v) {
  return (qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
}

// q2_K: sub-block i of 16 values has scale d * (scales[i] & 15) and min dmin * (scales[i] >> 4).
int q2_quant(const BlockQ2_K& b, int v) {
  return q2_bits(b.qs, v);
}

// q3_K: the low 2 bits as q2_K, minus 4 when bit (v / 32) of hmask[v % 32] is clear.
int q3_quant(const BlockQ3_K& b, int v) {
  const bool high = (b.hmask[v % 32] >> (v / 32)) & 1;
  return q2_bits(b.qs, v) - (high ? 0 : 4);
}

// q4_K / q5_K: value v in byte 32 * (v / 64) + v % 32 of qs, low nibble for the first 32 of
// each 64; q5_K's fifth bit is bit v / 32 of qh[v % 32].
int q4k_quant(const uint8_t qs[128], int v) {
  const uint8_t byte = qs[32 * (v / 64) + v % 32];
  return (v % 64) < 32 ? (byte & 0x0f) : (byte >> 4);
}
int q5k_quant(const BlockQ5_K& b, int v) {
  return q4k_quant(b.qs, v) | (((b.qh[v % 32] >> (v / 32)) & 1) << 4);
}

// q6_K: value v, quarter r = (v % 128) / 32 of its half h = v / 128: the low 4 bits from ql byte
// 64 h + 32 (r % 2) + v % 32 (low nibble for r < 2), the high 2 bits from qh[32 h + v % 32] at
// bit 2 r; minus 32.
int q6_quant(const BlockQ6_K& b, int v) {
  const int h = v / 128, r = (v % 128) / 32, l = v % 32;
  const uint8_t lo = b.ql[64 * h + 32 * (r % 2) + l];
  const int low = r < 2 ? (lo & 0x0f) : (lo >> 4);
  const int high = (b.qh[32 * h + l] >> (2 * r)) & 3;
  return (low | (high << 4)) - 32;
}

int iq4xs_quant(const BlockIq4Xs& b, int v) {
  const uint8_t byte = b.qs[16 * (v / 32) + v % 16];
  return kIq4nlValues[(v % 32) < 16 ? (byte & 0x0f) : (byte >> 4)];
}

void deq_q2_k(const BlockQ2_K& b, float* y) {
  const float d = h2f(b.d), dmin = h2f(b.dmin);
  for (int v = 0; v < 256; ++v) {
    const uint8_t s = b.scales[v / 16];
    y[v] = d * float(s & 0x0f) * float(q2_quant(b, v)) - dmin * float(s >> 4);
  }
}

void deq_q3_k(const BlockQ3_K& b, float* y) {
  const float d = h2f(b.d);
  for (int v = 0; v < 256; ++v)
    y[v] = d * float(q3_scale(b.scales, v / 16)) * float(q3_quant(b, v));
}

void deq_q4_k(const BlockQ4_K& b, float* y) {
  const float d = h2f(b.d), dmin = h2f(b.dmin);
  for (int v = 0; v < 256; ++v) {
    int sc, m;
    k4_scale_min(b.scales, v / 32, &sc, &m);
    y[v] = d * float(sc) * float(q4k_quant(b.qs, v)) - dmin * float(m);
  }
}

void deq_q5_k(const BlockQ5_K& b, float* y) {
  const float d = h2f(b.d), dmin = h2f(b.dmin);
  for (int v = 0; v < 256; ++v) {
    int sc, m;
    k4_scale_min(b.scales, v / 32, &sc, &m);
    y[v] = d * float(sc) * float(q5k_quant(b, v)) - dmin * float(m);
  }
}

void deq_q6_k(const BlockQ6_K& b, float* y) {
  const float d = h2f(b.d);
  for (int v = 0; v < 256; ++v) y[v] = d * float(b.scales[v / 16]) * float(q6_quant(b, v));
}

void deq_iq4_xs(const BlockIq4Xs& b, float* y) {
  const float d = h2f(b.d);
  for (int v = 0; v < 256; ++v) y[v] = d * float(iq4xs_scale(b, v / 32)) * float(iq4xs_quant(b, v));
}

template <class Block, void (*Deq)(const Block&, float*), int QK>
void deq_row(const void* src, float* dst, int64_t n) {
  const Block* b = blocks<Block>(src);
  for (int64_t i = 0; i < n / QK; ++i) Deq(b[i], dst + i * QK);
}

// --- dot products ------------------------------------------------------------------------------

// A legacy block's scale: its f16 d, or mxfp4's 2^(e - 128) (its levels are doubled).
template <class Block>
float block_scale(const Block& b) {
  if constexpr (std::is_same_v<Block, BlockMxfp4>) {
    return mxfp4_half_scale(b.e);
  } else {
    return h2f(b.d);
  }
}

// Legacy types (and mxfp4): sum over blocks of d_w d_a * sum(q_w q_a) (+ m_w * s_a for the
// types with a min).
template <class Block, int (*Quant)(const Block&, int), bool kMin, class Act>
float dot_legacy(int64_t n, const void* w, const void* act) {
  const Block* b = blocks<Block>(w);
  const Act* a = blocks<Act>(act);
  double sum = 0.0;
  for (int64_t i = 0; i < n / 32; ++i) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += Quant(b[i], j) * int32_t(a[i].qs[j]);
    double block = double(block_scale(b[i]) * h2f(a[i].d)) * double(s);
    if constexpr (kMin) block += double(h2f(b[i].m) * h2f(a[i].s));
    sum += block;
  }
  return float(sum);
}

int quant_q4_0(const BlockQ4_0& b, int j) {
  return (j < 16 ? (b.qs[j] & 0x0f) : (b.qs[j - 16] >> 4)) - 8;
}
int quant_q4_1(const BlockQ4_1& b, int j) {
  return j < 16 ? (b.qs[j] & 0x0f) : (b.qs[j - 16] >> 4);
}
int quant_q5_0(const BlockQ5_0& b, int j) {
  return q5_quant(b.qs, q5_high_bits(b.qh), j) - 16;
}
int quant_q5_1(const BlockQ5_1& b, int j) {
  return q5_quant(b.qs, q5_high_bits(b.qh), j);
}
int quant_q8_0(const BlockQ8_0& b, int j) {
  return b.qs[j];
}
int quant_iq4_nl(const BlockIq4Nl& b, int j) {
  return kIq4nlValues[j < 16 ? (b.qs[j] & 0x0f) : (b.qs[j - 16] >> 4)];
}
int quant_mxfp4(const BlockMxfp4& b, int j) {
  return kMxfp4Values[j < 16 ? (b.qs[j] & 0x0f) : (b.qs[j - 16] >> 4)];
}

// Sum over the super-block of q_w * q_a for values [v0, v0 + len).
template <class Block, int (*Quant)(const Block&, int)>
int32_t isum(const Block& b, const BlockQ8_K& a, int v0, int len) {
  int32_t s = 0;
  for (int v = v0; v < v0 + len; ++v) s += Quant(b, v) * int32_t(a.qs[v]);
  return s;
}

float dot_q2_k(int64_t n, const void* w, const void* act) {
  const auto* b = blocks<BlockQ2_K>(w);
  const auto* a = blocks<BlockQ8_K>(act);
  double sum = 0.0;
  for (int64_t i = 0; i < n / 256; ++i) {
    int32_t scaled = 0, mins = 0;
    for (int j = 0; j < 16; ++j) {
      scaled += (b[i].scales[j] & 0x0f) * isum<BlockQ2_K, q2_quant>(b[i], a[i], 16 * j, 16);
      mins += (b[i].scales[j] >> 4) * a[i].bsums[j];
    }
    sum += double(a[i].d) * (double(h2f(b[i].d)) * scaled - double(h2f(b[i].dmin)) * mins);
  }
  return float(sum);
}

float dot_q3_k(int64_t n, const void* w, const void* act) {
  const auto* b = blocks<BlockQ3_K>(w);
  const auto* a = blocks<BlockQ8_K>(act);
  double sum = 0.0;
  for (int64_t i = 0; i < n / 256; ++i) {
    int32_t s = 0;
    for (int j = 0; j < 16; ++j)
      s += q3_scale(b[i].scales, j) * isum<BlockQ3_K, q3_quant>(b[i], a[i], 16 * j, 16);
    sum += double(a[i].d) * double(h2f(b[i].d)) * s;
  }
  return float(sum);
}

int quant_q4_k(const BlockQ4_K& b, int v) {
  return q4k_quant(b.qs, v);
}

template <class Block, int (*Quant)(const Block&, int)>
float dot_q45_k(int64_t n, const void* w, const void* act) {
  const Block* b = blocks<Block>(w);
  const auto* a = blocks<BlockQ8_K>(act);
  double sum = 0.0;
  for (int64_t i = 0; i < n / 256; ++i) {
    int32_t scaled = 0, mins = 0;
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      k4_scale_min(b[i].scales, j, &sc, &m);
      scaled += sc * isum<Block, Quant>(b[i], a[i], 32 * j, 32);
      mins += m * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
    }
    sum += double(a[i].d) * (double(h2f(b[i].d)) * scaled - double(h2f(b[i].dmin)) * mins);
  }
  return float(sum);
}

float dot_q6_k(int64_t n, const void* w, const void* act) {
  const auto* b = blocks<BlockQ6_K>(w);
  const auto* a = blocks<BlockQ8_K>(act);
  double sum = 0.0;
  for (int64_t i = 0; i < n / 256; ++i) {
    int32_t s = 0;
    for (int j = 0; j < 16; ++j)
      s += b[i].scales[j] * isum<BlockQ6_K, q6_quant>(b[i], a[i], 16 * j, 16);
    sum += double(a[i].d) * double(h2f(b[i].d)) * s;
  }
  return float(sum);
}

float dot_iq4_xs(int64_t n, const void* w, const void* act) {
  const auto* b = blocks<BlockIq4Xs>(w);
  const auto* a = blocks<BlockQ8_K>(act);
  double sum = 0.0;
  for (int64_t i = 0; i < n / 256; ++i) {
    int32_t s = 0;
    for (int j = 0; j < 8; ++j)
      s += iq4xs_scale(b[i], j) * isum<BlockIq4Xs, iq4xs_quant>(b[i], a[i], 32 * j, 32);
    sum += double(a[i].d) * double(h2f(b[i].d)) * s;
  }
  return float(sum);
}

// Float weights: dequantize each value and multiply by the f32 activation.
float dot_float(GgmlType t, int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const float*>(act);
  const auto* p = static_cast<const uint8_t*>(w);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (t == GgmlType::F32) {
      std::memcpy(&v, p + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      v = t == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    sum += double(v) * double(x[i]);
  }
  return float(sum);
}

// --- activation quantizers ---------------------------------------------------------------------

// ggml's q8_0 / q8_1 block (quantize_row_q8_0 on x86): d = max|x| / 127, q[j] = x[j] * (127 /
// max|x|) rounded half to even; returns d (0 for an all-zero block).
float quantize_block_i8(const float* x, int len, int8_t* q) {
  float amax = 0.0f;
  for (int j = 0; j < len; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < len; ++j)
    q[j] = int8_t(std::clamp(std::nearbyint(x[j] * id), -127.0f, 127.0f));
  return amax / 127.0f;
}

// ggml's q8_K block (quantize_row_q8_K_ref): the signed value m of the first largest |x|, scale
// s = -127 / m, q[j] = x[j] * s rounded half to even (at most 127), d = 1 / s (negative where m
// is positive: q and d change sign together); an all-zero block is d = 0.
float quantize_block_q8_K(const float* x, int8_t* q) {
  float amax = 0.0f, m = 0.0f;
  for (int j = 0; j < 256; ++j)
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), m = x[j];
  if (amax == 0.0f) {
    std::fill(q, q + 256, int8_t(0));
    return 0.0f;
  }
  const float s = -127.0f / m;
  for (int j = 0; j < 256; ++j) q[j] = int8_t(std::min(std::nearbyint(s * x[j]), 127.0f));
  return 1.0f / s;
}

}  // namespace

void dequantize_row_ref(GgmlType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case GgmlType::F32:
      dequantize_row(DType::F32, src, dst, n);
      return;
    case GgmlType::F16:
      dequantize_row(DType::F16, src, dst, n);
      return;
    case GgmlType::BF16:
      dequantize_row(DType::BF16, src, dst, n);
      return;
    case GgmlType::Q4_0:
      return deq_row<BlockQ4_0, deq_q4_0, 32>(src, dst, n);
    case GgmlType::Q4_1:
      return deq_row<BlockQ4_1, deq_q4_1, 32>(src, dst, n);
    case GgmlType::Q5_0:
      return deq_row<BlockQ5_0, deq_q5_0, 32>(src, dst, n);
    case GgmlType::Q5_1:
      return deq_row<BlockQ5_1, deq_q5_1, 32>(src, dst, n);
    case GgmlType::Q8_0:
      return deq_row<BlockQ8_0, deq_q8_0, 32>(src, dst, n);
    case GgmlType::IQ4_NL:
      return deq_row<BlockIq4Nl, deq_iq4_nl, 32>(src, dst, n);
    case GgmlType::MXFP4:
      return deq_row<BlockMxfp4, deq_mxfp4, 32>(src, dst, n);
    case GgmlType::Q2_K:
      return deq_row<BlockQ2_K, deq_q2_k, 256>(src, dst, n);
    case GgmlType::Q3_K:
      return deq_row<BlockQ3_K, deq_q3_k, 256>(src, dst, n);
    case GgmlType::Q4_K:
      return deq_row<BlockQ4_K, deq_q4_k, 256>(src, dst, n);
    case GgmlType::Q5_K:
      return deq_row<BlockQ5_K, deq_q5_k, 256>(src, dst, n);
    case GgmlType::Q6_K:
      return deq_row<BlockQ6_K, deq_q6_k, 256>(src, dst, n);
    case GgmlType::IQ4_XS:
      return deq_row<BlockIq4Xs, deq_iq4_xs, 256>(src, dst, n);
    default:
      KAMERA_ASSERT(!"dequantize_row_ref: not a weight type");
  }
}

namespace {

// The index of the E2M1 level (kMxfp4Values, in half-scale units) nearest to q; the first on ties.
uint8_t nearest_mxfp4(float q) {
  uint8_t best = 0;
  float best_err = INFINITY;
  for (uint8_t i = 0; i < 16; ++i) {
    const float err = std::fabs(q - float(kMxfp4Values[i]));
    if (err < best_err) best = i, best_err = err;
  }
  return best;
}

BlockMxfp4 quantize_mxfp4_block(const float* x) {
  float amax = 0;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  BlockMxfp4 b{};
  b.e = amax > 0 ? uint8_t(std::clamp(std::ilogb(amax) - 2 + 127, 0, 254)) : 0;
  const float half = mxfp4_half_scale(b.e);
  for (int j = 0; j < kQK / 2; ++j)
    b.qs[j] = uint8_t(nearest_mxfp4(x[j] / half) | nearest_mxfp4(x[j + kQK / 2] / half) << 4);
  return b;
}

}  // namespace

void quantize_mxfp4_ref(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<BlockMxfp4*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) out[b] = quantize_mxfp4_block(x + b * kQK);
}

void quantize_act_ref(GgmlType dt, const float* x, void* dst, int64_t n) {
  switch (dt) {
    case GgmlType::F32:
      std::memcpy(dst, x, size_t(n) * 4);
      return;
    case GgmlType::Q8_0: {
      auto* b = static_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < n / 32; ++i)
        b[i].d = f32_to_f16(quantize_block_i8(x + 32 * i, 32, b[i].qs));
      return;
    }
    case GgmlType::Q8_1: {
      auto* b = static_cast<BlockQ8_1*>(dst);
      for (int64_t i = 0; i < n / 32; ++i) {
        const float d = quantize_block_i8(x + 32 * i, 32, b[i].qs);
        int32_t s = 0;
        for (int j = 0; j < 32; ++j) s += b[i].qs[j];
        b[i].d = f32_to_f16(d);
        b[i].s = f32_to_f16(d * float(s));
      }
      return;
    }
    case GgmlType::Q8_K: {
      auto* b = static_cast<BlockQ8_K*>(dst);
      for (int64_t i = 0; i < n / 256; ++i) {
        b[i].d = quantize_block_q8_K(x + 256 * i, b[i].qs);
        for (int g = 0; g < 16; ++g) {
          int s = 0;
          for (int j = 0; j < 16; ++j) s += b[i].qs[16 * g + j];
          b[i].bsums[g] = int16_t(s);
        }
      }
      return;
    }
    default:
      KAMERA_ASSERT(!"quantize_act_ref: not a dot type");
  }
}

size_t act_row_bytes(GgmlType t, int64_t n) {
  const GgmlType dt = dot_type_of(t);
  if (dt == GgmlType::F32) return size_t(n) * 4;
  return *ggml_row_bytes(dt, n);
}

float vec_dot_ref(GgmlType t, int64_t n, const void* w, const void* act) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
      return dot_float(t, n, w, act);
    case GgmlType::Q4_0:
      return dot_legacy<BlockQ4_0, quant_q4_0, false, BlockQ8_0>(n, w, act);
    case GgmlType::Q4_1:
      return dot_legacy<BlockQ4_1, quant_q4_1, true, BlockQ8_1>(n, w, act);
    case GgmlType::Q5_0:
      return dot_legacy<BlockQ5_0, quant_q5_0, false, BlockQ8_0>(n, w, act);
    case GgmlType::Q5_1:
      return dot_legacy<BlockQ5_1, quant_q5_1, true, BlockQ8_1>(n, w, act);
    case GgmlType::Q8_0:
      return dot_legacy<BlockQ8_0, quant_q8_0, false, BlockQ8_0>(n, w, act);
    case GgmlType::IQ4_NL:
      return dot_legacy<BlockIq4Nl, quant_iq4_nl, false, BlockQ8_0>(n, w, act);
    case GgmlType::MXFP4:
      return dot_legacy<BlockMxfp4, quant_mxfp4, false, BlockQ8_0>(n, w, act);
    case GgmlType::Q2_K:
      return dot_q2_k(n, w, act);
    case GgmlType::Q3_K:
      return dot_q3_k(n, w, act);
    case GgmlType::Q4_K:
      return dot_q45_k<BlockQ4_K, quant_q4_k>(n, w, act);
    case GgmlType::Q5_K:
      return dot_q45_k<BlockQ5_K, q5k_quant>(n, w, act);
    case GgmlType::Q6_K:
      return dot_q6_k(n, w, act);
    case GgmlType::IQ4_XS:
      return dot_iq4_xs(n, w, act);
    default:
      KAMERA_ASSERT(!"vec_dot_ref: not a weight type");
      return 0.0f;
  }
}

}  // namespace kamera::quant
