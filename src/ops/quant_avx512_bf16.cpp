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
}  // namespace bf16

}  // namespace kamera::quant
