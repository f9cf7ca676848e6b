// The avx512_bf16 path: decode as avx512_vnni (BF16 weights aside: vdpbf16ps rows); prefill
// multiplies bf16 weight panels by bf16 activations with vdpbf16ps (two products per f32 lane,
// twice the f32 FMA rate), in 6 x 64 register tiles that hold y's columns in the vector lanes.
// Compiled with AVX512-BF16 flags
// (src/CMakeLists.txt); used only when the CPU has them.
// GCC 12's AVX-512 headers fill unused lanes with an "undefined" value that its own
// -Wuninitialized then reports inside the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/quant_kernels.h"
#include "ops/row_passes.h"

namespace kamera::quant {

namespace {

// n f32 values to bf16, round to nearest even (n a multiple of 16 but any tail is handled).
void to_bf16(const float* src, void* dst, int64_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh b = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), reinterpret_cast<const __m256i&>(b));
  }
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    const __m256bh b = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
    _mm256_mask_storeu_epi16(d + i, m, reinterpret_cast<const __m256i&>(b));
  }
}

size_t packed_bytes(int64_t m, int64_t k) {
  return size_t(m * k) * 2;
}

void pack(const float* x, int64_t m, int64_t k, void* dst) {
  to_bf16(x, dst, m * k);
}

// --- prefill with the output columns in the vector lanes ---------------------------------------
//
// The panel's rows (at most 64 weight rows of k bf16 values) are laid out once per call as k/2
// steps of 64 columns x 2 values (256 bytes: 4 vectors of 16 columns, each lane one column's pair
// of k values; zero past nw). A step then broadcasts each of MR activation rows' pair of values
// into a vdpbf16ps against NS of those vectors: MR x NS accumulators that hold y's columns, so no
// horizontal sums. k runs in chunks of kKc values, so that a chunk of the laid-out panel
// (64 x kKc x 2 bytes = 32 KiB) stays in L1 while every activation row passes it.
constexpr int kLaneRows = 6, kStrips = 4;
constexpr int64_t kKc = 256;

// out[c] = column c of the 16 x 16 matrix of 32-bit elements whose rows are r[0..15].
inline void transpose16(const __m512i (&r)[16], __m512i (&out)[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {  // pairs of rows interleaved
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // u[4g + c], 128-bit lane L: rows 4g..4g+3 of column 4L + c
    u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // lane L of u[c], u[4 + c], u[8 + c], u[12 + c] side by side
    const __m512i ab_lo = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
    const __m512i ab_hi = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
    const __m512i cd_lo = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i cd_hi = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    out[c] = _mm512_shuffle_i32x4(ab_lo, cd_lo, 0x88);
    out[4 + c] = _mm512_shuffle_i32x4(ab_lo, cd_lo, 0xdd);
    out[8 + c] = _mm512_shuffle_i32x4(ab_hi, cd_hi, 0x88);
    out[12 + c] = _mm512_shuffle_i32x4(ab_hi, cd_hi, 0xdd);
  }
}

// Rows [0, nw) of w (ldw apart, k values) as dst[s * 64 + j] = the pair (w[j][2s], w[j][2s + 1]),
// zero for j >= nw: 16 x 16 blocks of pairs transposed in registers.
void lay_out_panel(const uint16_t* w, int64_t ldw, int64_t nw, int64_t k, uint32_t* dst) {
  for (int q = 0; q < kStrips; ++q)
    for (int64_t s0 = 0; s0 < k / 2; s0 += 16) {
      __m512i r[16], c[16];
      for (int j = 0; j < 16; ++j)
        r[j] = 16 * q + j < nw ? _mm512_loadu_si512(w + (16 * q + j) * ldw + 2 * s0)
                               : _mm512_setzero_si512();
      transpose16(r, c);
      for (int t = 0; t < 16; ++t) _mm512_storeu_si512(dst + (s0 + t) * 64 + 16 * q, c[t]);
    }
}

// y[i][16 q + c] (+)= sum over `steps` pairs of x[i] . panel column 16 q + c, for i < MR and
// q < NS; the columns past the masks are neither read nor written.
template <int MR, int NS>
void lanes_tile(const uint16_t* x, int64_t ldx, const uint32_t* wp, int64_t steps, float* y,
                int64_t ldy, const __mmask16* mask, bool add) {
  __m512 acc[MR][NS];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int q = 0; q < NS; ++q)
      acc[i][q] = add ? _mm512_maskz_loadu_ps(mask[q], y + i * ldy + 16 * q) : _mm512_setzero_ps();
  for (int64_t s = 0; s < steps; ++s) {
    __m512bh wv[NS];
#pragma GCC unroll 4
    for (int q = 0; q < NS; ++q) {
      const __m512i v = _mm512_loadu_si512(wp + s * 64 + 16 * q);
      wv[q] = reinterpret_cast<const __m512bh&>(v);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      uint32_t pair;
      std::memcpy(&pair, x + i * ldx + 2 * s, 4);
      const __m512i b = _mm512_set1_epi32(int32_t(pair));
      const __m512bh xv = reinterpret_cast<const __m512bh&>(b);
#pragma GCC unroll 4
      for (int q = 0; q < NS; ++q) acc[i][q] = _mm512_dpbf16_ps(acc[i][q], xv, wv[q]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int q = 0; q < NS; ++q) _mm512_mask_storeu_ps(y + i * ldy + 16 * q, mask[q], acc[i][q]);
}

template <int MR>
void lanes_tile_ns(int ns, const uint16_t* x, int64_t ldx, const uint32_t* wp, int64_t steps,
                   float* y, int64_t ldy, const __mmask16* mask, bool add) {
  switch (ns) {
    case 1:
      return lanes_tile<MR, 1>(x, ldx, wp, steps, y, ldy, mask, add);
    case 2:
      return lanes_tile<MR, 2>(x, ldx, wp, steps, y, ldy, mask, add);
    case 3:
      return lanes_tile<MR, 3>(x, ldx, wp, steps, y, ldy, mask, add);
    default:
      return lanes_tile<MR, 4>(x, ldx, wp, steps, y, ldy, mask, add);
  }
}

void lanes_tile_any(int mr, int ns, const uint16_t* x, int64_t ldx, const uint32_t* wp,
                    int64_t steps, float* y, int64_t ldy, const __mmask16* mask, bool add) {
  switch (mr) {
    case 1:
      return lanes_tile_ns<1>(ns, x, ldx, wp, steps, y, ldy, mask, add);
    case 2:
      return lanes_tile_ns<2>(ns, x, ldx, wp, steps, y, ldy, mask, add);
    case 3:
      return lanes_tile_ns<3>(ns, x, ldx, wp, steps, y, ldy, mask, add);
    case 4:
      return lanes_tile_ns<4>(ns, x, ldx, wp, steps, y, ldy, mask, add);
    case 5:
      return lanes_tile_ns<5>(ns, x, ldx, wp, steps, y, ldy, mask, add);
    default:
      return lanes_tile_ns<6>(ns, x, ldx, wp, steps, y, ldy, mask, add);
  }
}

void gemm_lanes(int64_t m, int64_t nw, int64_t k, const void* xv, const void* wv, int64_t ldw,
                float* y, int64_t ldy) {
  const auto* x = static_cast<const uint16_t*>(xv);
  const auto* w = static_cast<const uint16_t*>(wv);
  thread_local std::vector<uint32_t> panel;
  panel.resize(size_t(k / 2) * 64);
  for (int64_t j0 = 0; j0 < nw; j0 += 64) {
    const int64_t nj = std::min<int64_t>(64, nw - j0);
    lay_out_panel(w + j0 * ldw, ldw, nj, k, panel.data());
    const int ns = int((nj + 15) / 16);
    __mmask16 mask[kStrips];
    for (int q = 0; q < kStrips; ++q) {
      const int64_t left = std::clamp<int64_t>(nj - 16 * q, 0, 16);
      mask[q] = __mmask16((1u << left) - 1);
    }
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      const int64_t kc = std::min(kKc, k - k0);
      for (int64_t i = 0; i < m; i += kLaneRows) {
        const int mr = int(std::min<int64_t>(kLaneRows, m - i));
        lanes_tile_any(mr, ns, x + i * k + k0, k, panel.data() + (k0 / 2) * 64, kc / 2,
                       y + i * ldy + j0, ldy, mask, k0 > 0);
      }
    }
  }
}

// --- decode of BF16 weights: vdpbf16ps over the file's rows -------------------------------------
//
// NR weight rows (row_bytes apart) against NA activation rows rounded to bf16 (act_bytes apart):
// each 64-byte load of an activation row feeds NR rows' products, each weight load NA rows'.
// The last cols % 32 values come in through masked loads (zero past the end in both operands).
template <int NA, int NR>
void bf16_rows(const uint8_t* w, size_t row_bytes, int64_t cols, const uint8_t* act,
               size_t act_bytes, float* y, int64_t y_stride) {
  __m512 acc[NA][NR];
#pragma GCC unroll 4
  for (int i = 0; i < NA; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  auto step = [&](int64_t p, __mmask32 m) {
    __m512bh wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) {
      const __m512i v = _mm512_maskz_loadu_epi16(m, w + j * row_bytes + 2 * p);
      wv[j] = reinterpret_cast<const __m512bh&>(v);
    }
#pragma GCC unroll 4
    for (int i = 0; i < NA; ++i) {
      const __m512i v = _mm512_maskz_loadu_epi16(m, act + i * act_bytes + 2 * p);
      const __m512bh xv = reinterpret_cast<const __m512bh&>(v);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  };
  int64_t p = 0;
  for (; p + 32 <= cols; p += 32) step(p, ~__mmask32(0));
  if (p < cols) step(p, __mmask32((1ull << (cols - p)) - 1));
#pragma GCC unroll 4
  for (int i = 0; i < NA; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) y[i * y_stride + j] = _mm512_reduce_add_ps(acc[i][j]);
}

// BF16 rows [r0, r1) against n_act bf16 activation rows, in passes (ops/row_passes.h).
void vec_dot_rows_bf16(int64_t cols, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
                       const uint8_t* act, size_t act_bytes, int n_act, float* y,
                       int64_t y_stride) {
  rows_in_passes(w, row_bytes, r0, r1, act, act_bytes, n_act, y, y_stride,
                 [&](auto na, auto nr, const uint8_t* wr, const uint8_t* xa, float* ya) {
                   bf16_rows<decltype(na)::value, decltype(nr)::value>(wr, row_bytes, cols, xa,
                                                                       act_bytes, ya, y_stride);
                 });
}

}  // namespace

// The entry points (quant_kernels.h); the table that holds them is built in quant.cpp, because
// code compiled with these flags must not run before the CPU check.
namespace bf16 {
void to_bf16(const float* src, void* dst, int64_t n) {
  kamera::quant::to_bf16(src, dst, n);
}
size_t packed_x_bytes(int64_t m, int64_t k) {
  return packed_bytes(m, k);
}
void pack_x(const float* x, int64_t m, int64_t k, void* dst) {
  pack(x, m, k, dst);
}
void gemm(int64_t m, int64_t nw, int64_t k, const void* x, const void* w, int64_t ldw, float* y,
          int64_t ldy) {
  gemm_lanes(m, nw, k, x, w, ldw, y, ldy);
}
void vec_dot_rows(GgmlType t, int64_t cols, const uint8_t* w, size_t row_bytes, int64_t r0,
                  int64_t r1, const uint8_t* act, size_t act_bytes, int n_act, float* y,
                  int64_t y_stride) {
  if (t != GgmlType::BF16)
    return avx512_vnni_kernels().vec_dot_rows(t, cols, w, row_bytes, r0, r1, act, act_bytes, n_act,
                                              y, y_stride);
  vec_dot_rows_bf16(cols, w, row_bytes, r0, r1, act, act_bytes, n_act, y, y_stride);
}
}  // namespace bf16

}  // namespace kamera::quant
