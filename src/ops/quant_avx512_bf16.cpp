// The avx512_bf16 path: decode as avx512_vnni; prefill multiplies bf16 weight panels by bf16
// activations with vdpbf16ps (two products per f32 lane, twice the f32 FMA rate), in 4 x 6
// register tiles whose k-sums sit in the vector lanes. Compiled with AVX512-BF16 flags
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

#include <cstdint>

#include "ops/quant_kernels.h"

namespace kamera::quant {

namespace {

constexpr int kMr = 4, kNr = 6;

inline float hsum512(__m512 v) {
  __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

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

template <int MR, int NR>
void tile(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, int64_t k, float* y,
          int64_t ldy, bool add) {
  // Loops over the tile are unrolled so the accumulators stay in registers.
  __m512 acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; p += 32) {
    __m512bh wv[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const __m512i v = _mm512_loadu_si512(w + j * ldw + p);
      wv[j] = reinterpret_cast<const __m512bh&>(v);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512i v = _mm512_loadu_si512(x + i * ldx + p);
      const __m512bh xv = reinterpret_cast<const __m512bh&>(v);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const float s = hsum512(acc[i][j]);
      y[i * ldy + j] = add ? y[i * ldy + j] + s : s;
    }
}

template <int MR>
void tile_row(int nr, const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, int64_t k,
              float* y, int64_t ldy, bool add) {
  switch (nr) {
    case 1:
      return tile<MR, 1>(x, ldx, w, ldw, k, y, ldy, add);
    case 2:
      return tile<MR, 2>(x, ldx, w, ldw, k, y, ldy, add);
    case 3:
      return tile<MR, 3>(x, ldx, w, ldw, k, y, ldy, add);
    case 4:
      return tile<MR, 4>(x, ldx, w, ldw, k, y, ldy, add);
    case 5:
      return tile<MR, 5>(x, ldx, w, ldw, k, y, ldy, add);
    default:
      return tile<MR, 6>(x, ldx, w, ldw, k, y, ldy, add);
  }
}

void gemm(int64_t m, int64_t nw, int64_t k, const void* xv, const void* wv, int64_t ldw, float* y,
          int64_t ldy) {
  const auto* x = static_cast<const uint16_t*>(xv);
  const auto* w = static_cast<const uint16_t*>(wv);
  constexpr int64_t kc_max = 2048;
  for (int64_t k0 = 0; k0 < k; k0 += kc_max) {
    const int64_t kc = k - k0 < kc_max ? k - k0 : kc_max;
    for (int64_t i = 0; i < m; i += kMr) {
      const int mr = int(m - i < kMr ? m - i : kMr);
      for (int64_t j = 0; j < nw; j += kNr) {
        const int nr = int(nw - j < kNr ? nw - j : kNr);
        const uint16_t* xs = x + i * k + k0;
        const uint16_t* ws = w + j * ldw + k0;
        float* ys = y + i * ldy + j;
        switch (mr) {
          case 1:
            tile_row<1>(nr, xs, k, ws, ldw, kc, ys, ldy, k0 > 0);
            break;
          case 2:
            tile_row<2>(nr, xs, k, ws, ldw, kc, ys, ldy, k0 > 0);
            break;
          case 3:
            tile_row<3>(nr, xs, k, ws, ldw, kc, ys, ldy, k0 > 0);
            break;
          default:
            tile_row<4>(nr, xs, k, ws, ldw, kc, ys, ldy, k0 > 0);
            break;
        }
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

template <int NA>
void bf16_rows_na(int nr, const uint8_t* w, size_t row_bytes, int64_t cols, const uint8_t* act,
                  size_t act_bytes, float* y, int64_t y_stride) {
  switch (nr) {
    case 1:
      return bf16_rows<NA, 1>(w, row_bytes, cols, act, act_bytes, y, y_stride);
    case 2:
      return bf16_rows<NA, 2>(w, row_bytes, cols, act, act_bytes, y, y_stride);
    case 3:
      return bf16_rows<NA, 3>(w, row_bytes, cols, act, act_bytes, y, y_stride);
    default:
      return bf16_rows<NA, 4>(w, row_bytes, cols, act, act_bytes, y, y_stride);
  }
}

// Measured on the 2-core AMD host (0.5b BF16 file, tg64, 3 interleaved rounds): 4 rows per
// pass with the rows 4 KiB on requested as a burst per pass beat 1 row per pass and prefetches
// spread over the loads (46.7 / 43.2 / 36.3 tok/s against at most 43.0 / 35.4 / 35.1).
constexpr int kRowsPerPass = 4;
constexpr size_t kAheadBytes = 4096;

// BF16 rows [r0, r1) against n_act bf16 activation rows, kRowsPerPass weight rows and up to 4
// activation rows per pass. The weights stream once: while a pass runs, the rows about
// kAheadBytes further on are requested (the hardware prefetchers stop at 4 KiB page edges).
void vec_dot_rows_bf16(int64_t cols, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
                       const uint8_t* act, size_t act_bytes, int n_act, float* y,
                       int64_t y_stride) {
  const uint8_t* end = w + size_t(r1) * row_bytes;
  for (int64_t r = r0; r < r1; r += kRowsPerPass) {
    const int nr = int(r1 - r < kRowsPerPass ? r1 - r : kRowsPerPass);
    const uint8_t* wr = w + size_t(r) * row_bytes;
    const uint8_t* pf = wr + kAheadBytes;
    const uint8_t* pf_end = pf + size_t(nr) * row_bytes < end ? pf + size_t(nr) * row_bytes : end;
    for (; pf < pf_end; pf += 64) _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T0);
    for (int a = 0; a < n_act; a += 4) {
      const uint8_t* xa = act + size_t(a) * act_bytes;
      float* ya = y + a * y_stride + r;
      switch (n_act - a < 4 ? n_act - a : 4) {
        case 1:
          bf16_rows_na<1>(nr, wr, row_bytes, cols, xa, act_bytes, ya, y_stride);
          break;
        case 2:
          bf16_rows_na<2>(nr, wr, row_bytes, cols, xa, act_bytes, ya, y_stride);
          break;
        case 3:
          bf16_rows_na<3>(nr, wr, row_bytes, cols, xa, act_bytes, ya, y_stride);
          break;
        default:
          bf16_rows_na<4>(nr, wr, row_bytes, cols, xa, act_bytes, ya, y_stride);
          break;
      }
    }
  }
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
  kamera::quant::gemm(m, nw, k, x, w, ldw, y, ldy);
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
