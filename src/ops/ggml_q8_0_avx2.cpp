// ggml_q8_0::rows_avx2 (ops/ggml_q8_0.h), compiled with AVX2 + FMA + F16C (src/CMakeLists.txt)
// and called only when the CPU has them: ggml's x86 q8_0 dot, 4 activation rows per pass over a
// weight row (each output keeps its own 8 lanes, so the tile changes no rounding).
#include <immintrin.h>

#include <algorithm>

#include "ops/ggml_q8_0.h"
#include "ops/quant_blocks.h"

namespace kamera::ggml_q8_0 {

namespace {

using quant::BlockQ8_0;

inline __m256i load32(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline float half(uint16_t h) {
  return _cvtsh_ss(h);
}

// The 8 sums of 4 products q_w[4l..4l+3] . q_a[4l..4l+3] as floats, as ggml forms them: |q_w|
// times q_a with q_w's sign, pairs to int16 (maddubs), pairs of pairs to int32 (madd).
inline __m256 lane_sums(__m256i abs_w, __m256i w, __m256i a) {
  const __m256i p16 = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(a, w));
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

// The lanes in hsum_float_8's order.
inline float hsum(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// y[i * y_stride] = dot(w, a_i) for the NA activation rows a_0.. (act_bytes apart).
template <int NA>
void dots(int64_t nb, const BlockQ8_0* w, const uint8_t* act, size_t act_bytes, float* y,
          int64_t y_stride) {
  const BlockQ8_0* a[NA];
  __m256 acc[NA];
  for (int i = 0; i < NA; ++i) {
    a[i] = reinterpret_cast<const BlockQ8_0*>(act + size_t(i) * act_bytes);
    acc[i] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i qw = load32(w[b].qs);
    const __m256i abs_w = _mm256_sign_epi8(qw, qw);
    const float dw = half(w[b].d);
    for (int i = 0; i < NA; ++i) {
      const __m256 d = _mm256_set1_ps(dw * half(a[i][b].d));
      acc[i] = _mm256_fmadd_ps(d, lane_sums(abs_w, qw, load32(a[i][b].qs)), acc[i]);
    }
  }
  for (int i = 0; i < NA; ++i) y[i * y_stride] = hsum(acc[i]);
}

}  // namespace

void rows_avx2(int64_t cols, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
               const uint8_t* act, size_t act_bytes, int n_act, float* y, int64_t y_stride) {
  const int64_t nb = cols / 32;
  for (int a0 = 0; a0 < n_act; a0 += 4) {
    const uint8_t* as = act + size_t(a0) * act_bytes;
    float* ya = y + a0 * y_stride;
    for (int64_t r = r0; r < r1; ++r) {
      const auto* wr = reinterpret_cast<const BlockQ8_0*>(w + size_t(r) * row_bytes);
      switch (std::min(4, n_act - a0)) {
        case 4:
          dots<4>(nb, wr, as, act_bytes, ya + r, y_stride);
          break;
        case 3:
          dots<3>(nb, wr, as, act_bytes, ya + r, y_stride);
          break;
        case 2:
          dots<2>(nb, wr, as, act_bytes, ya + r, y_stride);
          break;
        default:
          dots<1>(nb, wr, as, act_bytes, ya + r, y_stride);
          break;
      }
    }
  }
}

}  // namespace kamera::ggml_q8_0
