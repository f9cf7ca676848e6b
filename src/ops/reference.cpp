#include "ops/reference.h"

#include <cmath>
#include <vector>

namespace kamera::ref {

void rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int dim, float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double scale = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i) y[r * dim + i] = float(x[r * dim + i] * scale * w[i]);
  }
}

void softmax(float* x, int n) {
  double mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = std::fmax(mx, double(x[i]));
  double sum = 0;
  std::vector<double> e(n);
  for (int i = 0; i < n; ++i) sum += e[i] = std::exp(double(x[i]) - mx);
  for (int i = 0; i < n; ++i) x[i] = float(e[i] / sum);
}

void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    gate[i] = float(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void matmul_wt(const float* x, const float* w, const float* bias, float* y, int T, int in,
               int out) {
  for (int t = 0; t < T; ++t)
    for (int o = 0; o < out; ++o) {
      double s = bias ? bias[o] : 0.0;
      for (int i = 0; i < in; ++i) s += double(x[size_t(t) * in + i]) * w[size_t(o) * in + i];
      y[size_t(t) * out + o] = float(s);
    }
}

void attention(const float* q, const float* k, const float* v, float* out, int T, int N, int first,
               int n_heads, int n_kv_heads, int head_dim, bool (*blocked)(int, int, const void*),
               const void* ctx) {
  const int group = n_heads / n_kv_heads;
  const double scale = 1.0 / std::sqrt(double(head_dim));
  std::vector<double> s(N);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < n_heads; ++h) {
      const int g = h / group;
      const float* qh = q + (size_t(t) * n_heads + h) * head_dim;
      double mx = -INFINITY;
      for (int j = 0; j < N; ++j) {
        if (j > first + t || (blocked && blocked(t, j, ctx))) {
          s[j] = -INFINITY;
          continue;
        }
        const float* kj = k + (size_t(j) * n_kv_heads + g) * head_dim;
        double d = 0;
        for (int i = 0; i < head_dim; ++i) d += double(qh[i]) * kj[i];
        s[j] = d * scale;
        mx = std::fmax(mx, s[j]);
      }
      double sum = 0;
      for (int j = 0; j < N; ++j) sum += s[j] = std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx);
      float* oh = out + (size_t(t) * n_heads + h) * head_dim;
      for (int i = 0; i < head_dim; ++i) {
        double o = 0;
        for (int j = 0; j < N; ++j)
          if (s[j] != 0.0) o += s[j] / sum * v[(size_t(j) * n_kv_heads + g) * head_dim + i];
        oh[i] = float(o);
      }
    }
}

}  // namespace kamera::ref
