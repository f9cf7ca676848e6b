#include "ops/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/thread_pool.h"
#include "ops/clones.h"

namespace kamera {

namespace {

// e^x as ggml's CPU backend computes it (ggml-cpu vec.h, ggml_v_expf: the expf of Arm's
// optimized-routines, at most 1.45 ulp + 0.5 off), so that SiLU and softmax round as llama.cpp's
// do on x86 (a last-bit difference in a SwiGLU value moves a q8_0 block's scale across an f16
// rounding step: tests/data/quantized/README.md). n = round(x / ln2) by the 1.5 * 2^23 shift,
// b = x - n ln2 in two fused steps, e^b by a degree-5 polynomial (Estrin form), times 2^n. Every
// step is an explicit fma or a single operation, so no compiler contraction changes a bit.
// Beyond |n| > 192 the result is 0 (x < 0) or inf; 2^n is applied in two halves so that the
// subnormal range rounds once. Branch-free so it vectorizes.
inline float exp_poly(float x) {
  constexpr float kShift = 0x1.8p23f, kLog2e = 0x1.715476p+0f;
  constexpr float kLn2Hi = 0x1.62e4p-1f, kLn2Lo = 0x1.7f7d1cp-20f;
  const float z = std::fma(x, kLog2e, kShift);
  const float n = z - kShift;
  const float b = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, x));
  const float u = b * b;
  const float p45 = std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f);
  const float p23 = std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f);
  const float p01 = std::fma(0x1.ffffecp-1f, b, 1.0f);
  const float j = std::fma(std::fma(p45, u, p23), u, p01);
  // 2^n as two powers of two of exponent n/2 each (|n| <= 192 keeps both normal)
  const float nc = n >= -192.0f ? (n <= 192.0f ? n : 192.0f) : -192.0f;  // NaN: -192
  const int32_t ni = int32_t(nc);
  const int32_t n1 = ni / 2, n2 = ni - n1;
  const uint32_t b1 = uint32_t(n1 + 127) << 23, b2 = uint32_t(n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  const float r = j * s1 * s2;
  return std::fabs(n) > 192.0f ? (n > 0.0f ? INFINITY : 0.0f) : r;
}

// Sums of squares of N rows as ggml's rms_norm forms them: the f32 squares added in double in
// order (no reassociation: every build and vector width gives the same bits); N rows at a time,
// each its own chain, so the in-order adds overlap.
template <int N>
inline void square_sums(const float* x, int dim, double* ss) {
  double s[N] = {};
  for (int i = 0; i < dim; ++i)
    for (int k = 0; k < N; ++k) {
      const float v = x[k * dim + i];
      s[k] += double(v * v);
    }
  for (int k = 0; k < N; ++k) ss[k] = s[k];
}

// y = x / sqrt(mean(x^2) + eps) * w, the mean rounded to f32 as in ggml.
KAMERA_CLONES void rmsnorm_rows(const float* x, const float* w, float* y, int64_t r0, int64_t r1,
                                int dim, float eps) {
  double ss[64];
  for (int64_t c0 = r0; c0 < r1; c0 += 64) {
    const int64_t c1 = std::min<int64_t>(r1, c0 + 64);
    int64_t g = c0;
    for (; g + 8 <= c1; g += 8) square_sums<8>(x + g * dim, dim, ss + (g - c0));
    for (; g < c1; ++g) square_sums<1>(x + g * dim, dim, ss + (g - c0));
    for (int64_t r = c0; r < c1; ++r) {
      const float mean = float(ss[r - c0] / double(dim));
      const float scale = 1.0f / std::sqrt(mean + eps);
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
#pragma omp simd
      for (int i = 0; i < dim; ++i) yr[i] = xr[i] * scale * w[i];
    }
  }
}

KAMERA_CLONES void silu_mul_range(float* gate, const float* up, int64_t i0, int64_t i1) {
#pragma omp simd
  for (int64_t i = i0; i < i1; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + exp_poly(-g)) * up[i];
  }
}

}  // namespace

void rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int dim, float eps,
             ThreadPool* pool) {
  if (pool && n_rows > 1) {
    pool->parallel_for(n_rows,
                       [&](int64_t a, int64_t b) { rmsnorm_rows(x, w, y, a, b, dim, eps); });
  } else {
    rmsnorm_rows(x, w, y, 0, n_rows, dim, eps);
  }
}

namespace {
KAMERA_CLONES void exp_inplace_body(float* x, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] = exp_poly(x[i]);
}
}  // namespace
void exp_inplace(float* x, int n) {
  exp_inplace_body(x, n);
}

// As ggml's soft_max: the exponentials summed 16 at a time in the order of _mm512_reduce_add_ps
// (halves, quarters, pairs; the last 16 padded with zeros), those sums added in double, and the
// row scaled by the f32 of 1 / sum. Explicit, so every build rounds the same.
namespace {
KAMERA_CLONES void softmax_given_max_body(float* x, int n, float mx, float extra_mass) {
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] = exp_poly(x[i] - mx);
  double sum = 0.0;
  for (int c = 0; c < n; c += 16) {
    float l[16] = {};
    for (int k = 0; k < 16 && c + k < n; ++k) l[k] = x[c + k];
    float h[8], q[4];
    for (int k = 0; k < 8; ++k) h[k] = l[k + 8] + l[k];
    for (int k = 0; k < 4; ++k) q[k] = h[k + 4] + h[k];
    sum += double((q[0] + q[2]) + (q[1] + q[3]));
  }
  const float inv = float(1.0 / (sum + double(extra_mass)));
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] *= inv;
}
}  // namespace
void softmax_given_max(float* x, int n, float mx, float extra_mass) {
  softmax_given_max_body(x, n, mx, extra_mass);
}

namespace {
KAMERA_CLONES void softmax_body(float* x, int n) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  softmax_given_max(x, n, mx);
}
}  // namespace
void softmax(float* x, int n) {
  softmax_body(x, n);
}

void swiglu_oai_mul(float* gate, const float* up, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    gate[i] = g / (1.0f + std::exp(alpha * (-g))) * (u + 1.0f);
  }
}

void silu_mul(float* gate, const float* up, int64_t n, ThreadPool* pool) {
  if (pool && n >= 16384) {
    pool->parallel_for(n, [&](int64_t a, int64_t b) { silu_mul_range(gate, up, a, b); });
  } else {
    silu_mul_range(gate, up, 0, n);
  }
}

void gelu_tanh_mul(float* gate, const float* up, int64_t n, ThreadPool* pool) {
  auto range = [gate, up](int64_t a, int64_t b) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
    for (int64_t i = a; i < b; ++i) {
      const float x = gate[i];
      gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCubic * x * x))) * up[i];
    }
  };
  if (pool && n >= 16384) {
    pool->parallel_for(n, range);
  } else {
    range(0, n);
  }
}

namespace {
KAMERA_CLONES void add_inplace_body(float* y, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}
}  // namespace
void add_inplace(float* y, const float* x, int64_t n) {
  add_inplace_body(y, x, n);
}

namespace {
KAMERA_CLONES float dot_body(const float* a, const float* b, int n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
}  // namespace
float dot(const float* a, const float* b, int n) {
  return dot_body(a, b, n);
}

namespace {
KAMERA_CLONES void axpy_body(float alpha, const float* x, float* y, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) y[i] += alpha * x[i];
}
}  // namespace
void axpy(float alpha, const float* x, float* y, int n) {
  axpy_body(alpha, x, y, n);
}

}  // namespace kamera
