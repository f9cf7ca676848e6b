#include "ops/kernels.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/thread_pool.h"
#include "ops/clones.h"

namespace kamera {

namespace {

// exp(x) = 2^n * e^r with n = round(x / ln2), r = x - n ln2 (Cody-Waite split), e^r by a
// degree-6 Taylor polynomial on |r| <= ln2/2. Branch-free so it vectorizes.
inline float exp_poly(float x_in) {
  // clamp with compares (vectorizes; std::fmin/fmax may become libm calls)
  float x = x_in < -87.3f ? -87.3f : x_in;
  x = x > 88.7f ? 88.7f : x;
  const float n = std::nearbyint(x * 1.44269504088896341f);
  const float r = std::fma(n, -0.693145751953125f, x);
  const float r2 = std::fma(n, -1.428606765330187045e-06f, r);
  float p = 1.0f / 720.0f;
  p = std::fma(p, r2, 1.0f / 120.0f);
  p = std::fma(p, r2, 1.0f / 24.0f);
  p = std::fma(p, r2, 1.0f / 6.0f);
  p = std::fma(p, r2, 0.5f);
  p = std::fma(p, r2, 1.0f);
  p = std::fma(p, r2, 1.0f);
  // 2^n by exponent bits; n in [-126, 128]; split to stay in the normal range.
  const int32_t ni = int32_t(n);
  const int32_t n1 = ni / 2, n2 = ni - n1;
  const uint32_t b1 = uint32_t(n1 + 127) << 23, b2 = uint32_t(n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  return x_in < -87.3f ? 0.0f : p * s1 * s2;  // below: flush to 0 (exact for masked -inf)
}

KAMERA_CLONES void rmsnorm_rows(const float* x, const float* w, float* y, int64_t r0, int64_t r1,
                                int dim, float eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float scale = 1.0f / std::sqrt(ss / float(dim) + eps);
#pragma omp simd
    for (int i = 0; i < dim; ++i) yr[i] = xr[i] * scale * w[i];
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

KAMERA_CLONES void exp_inplace(float* x, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] = exp_poly(x[i]);
}

KAMERA_CLONES void softmax_given_max(float* x, int n, float mx, float extra_mass) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < n; ++i) {
    x[i] = exp_poly(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / (sum + extra_mass);
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

KAMERA_CLONES void softmax(float* x, int n) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  softmax_given_max(x, n, mx);
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

KAMERA_CLONES void add_inplace(float* y, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

KAMERA_CLONES float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

KAMERA_CLONES void axpy(float alpha, const float* x, float* y, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace kamera
