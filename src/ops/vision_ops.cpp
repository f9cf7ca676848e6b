#include "ops/vision_ops.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "ops/clones.h"
#include "ops/gemm.h"
#include "ops/kernels.h"

namespace kamera {

namespace {

// Runs fn(begin, end) over [0, n) on the pool when there is enough work to share.
template <class F>
void maybe_parallel(ThreadPool* pool, int64_t n, int64_t min_per_thread, const F& fn) {
  if (pool && pool->size() > 1 && n >= 2 * min_per_thread) {
    pool->parallel_for(n, [&](int64_t a, int64_t b) { fn(a, b); });
  } else {
    fn(0, n);
  }
}

KAMERA_CLONES void layernorm_rows(const float* x, const float* w, const float* b, float* y,
                                  int64_t r0, int64_t r1, int dim, float eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double sum = 0.0;
    for (int i = 0; i < dim; ++i) sum += xr[i];
    const double mean = sum / dim;
    double var = 0.0;
    for (int i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const float m = float(mean), inv = float(1.0 / std::sqrt(var / dim + eps));
#pragma omp simd
    for (int i = 0; i < dim; ++i) yr[i] = (xr[i] - m) * inv * w[i] + (b ? b[i] : 0.0f);
  }
}

KAMERA_CLONES void quick_gelu_range(float* x, int64_t i0, int64_t i1) {
  constexpr int64_t kBlock = 256;
  float e[kBlock];
  for (int64_t i = i0; i < i1; i += kBlock) {
    const int m = int(std::min(kBlock, i1 - i));
#pragma omp simd
    for (int j = 0; j < m; ++j) e[j] = -1.702f * x[i + j];
    exp_inplace(e, m);
#pragma omp simd
    for (int j = 0; j < m; ++j) x[i + j] = x[i + j] / (1.0f + e[j]);
  }
}

}  // namespace

void layernorm(const float* x, const float* w, const float* b, float* y, int64_t n_rows, int dim,
               float eps, ThreadPool* pool) {
  maybe_parallel(pool, n_rows, 8,
                 [&](int64_t a, int64_t e) { layernorm_rows(x, w, b, y, a, e, dim, eps); });
}

void gelu_erf_inplace(float* x, int64_t n, ThreadPool* pool) {
  maybe_parallel(pool, n, 8192, [&](int64_t a, int64_t e) {
    for (int64_t i = a; i < e; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * float(M_SQRT1_2)));
  });
}

void gelu_tanh_inplace(float* x, int64_t n, ThreadPool* pool) {
  constexpr float kC = 0.7978845608028654f;  // sqrt(2 / pi)
  maybe_parallel(pool, n, 8192, [&](int64_t a, int64_t e) {
    for (int64_t i = a; i < e; ++i) {
      const float v = x[i];
      x[i] = 0.5f * v * (1.0f + std::tanh(kC * (v + 0.044715f * v * v * v)));
    }
  });
}

void quick_gelu_inplace(float* x, int64_t n, ThreadPool* pool) {
  maybe_parallel(pool, n, 16384, [&](int64_t a, int64_t e) { quick_gelu_range(x, a, e); });
}

void vision_rope(float* x, int n, int n_heads, int head_dim, std::span<const int32_t> h,
                 std::span<const int32_t> w, double theta, ThreadPool* pool) {
  const int half = head_dim / 2, quarter = head_dim / 4;
  std::vector<double> inv(static_cast<size_t>(quarter));
  for (int j = 0; j < quarter; ++j) inv[size_t(j)] = std::pow(theta, -4.0 * j / head_dim);
  maybe_parallel(pool, n, 16, [&](int64_t a, int64_t e) {
    std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
    for (int64_t t = a; t < e; ++t) {
      for (int k = 0; k < half; ++k) {
        const double ang =
            k < quarter ? h[size_t(t)] * inv[size_t(k)] : w[size_t(t)] * inv[size_t(k - quarter)];
        c[size_t(k)] = float(std::cos(ang));
        s[size_t(k)] = float(std::sin(ang));
      }
      for (int hd = 0; hd < n_heads; ++hd) {
        float* v = x + (size_t(t) * n_heads + hd) * head_dim;
        for (int k = 0; k < half; ++k) {
          const float x0 = v[k], x1 = v[k + half];
          v[k] = x0 * c[size_t(k)] - x1 * s[size_t(k)];
          v[k + half] = x1 * c[size_t(k)] + x0 * s[size_t(k)];
        }
      }
    }
  });
}

void grouped_attention(const float* q, const float* k, const float* v, float* out, int n,
                       int n_heads, int head_dim, const AttentionGroups& groups,
                       std::vector<float>& scratch, ThreadPool* pool) {
  (void)n;
  constexpr int kQueryBlock = 512;  // score rows held at once: memory O(block x group)
  const int width = n_heads * head_dim;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  for (size_t g = 0; g + 1 < groups.offsets.size(); ++g) {
    const int32_t* idx = groups.members.data() + groups.offsets[g];
    const int m = groups.offsets[g + 1] - groups.offsets[g];
    if (m <= 0) continue;
    const int qb = std::min(m, kQueryBlock);
    const size_t need = size_t(m) * head_dim * 2 + size_t(qb) * head_dim * 2 + size_t(qb) * m;
    if (scratch.size() < need) scratch.resize(need);
    float* kh = scratch.data();              // m x hd
    float* vt = kh + size_t(m) * head_dim;   // hd x m
    float* qh = vt + size_t(m) * head_dim;   // qb x hd
    float* oh = qh + size_t(qb) * head_dim;  // qb x hd
    float* sc = oh + size_t(qb) * head_dim;  // qb x m
    for (int hd = 0; hd < n_heads; ++hd) {
      const size_t col = size_t(hd) * head_dim;
      for (int j = 0; j < m; ++j) {
        const float* kr = k + size_t(idx[j]) * width + col;
        const float* vr = v + size_t(idx[j]) * width + col;
        std::copy(kr, kr + head_dim, kh + size_t(j) * head_dim);
        for (int e = 0; e < head_dim; ++e) vt[size_t(e) * m + j] = vr[e];
      }
      for (int i0 = 0; i0 < m; i0 += qb) {
        const int rows = std::min(qb, m - i0);
        for (int i = 0; i < rows; ++i) {
          const float* qr = q + size_t(idx[i0 + i]) * width + col;
          std::copy(qr, qr + head_dim, qh + size_t(i) * head_dim);
        }
        matmul_wt(qh, kh, nullptr, sc, rows, head_dim, m);  // scores = q k^T: [rows x m]
        maybe_parallel(pool, rows, 32, [&](int64_t a, int64_t e) {
          for (int64_t i = a; i < e; ++i) {
            float* r = sc + size_t(i) * m;
            for (int j = 0; j < m; ++j) r[j] *= scale;
            softmax(r, m);
          }
        });
        matmul_wt(sc, vt, nullptr, oh, rows, m, head_dim);  // p v: [rows x hd]
        for (int i = 0; i < rows; ++i)
          std::copy(oh + size_t(i) * head_dim, oh + size_t(i + 1) * head_dim,
                    out + size_t(idx[i0 + i]) * width + col);
      }
    }
  }
}

}  // namespace kamera
