// Plain scalar references of every kernel, kept forever for tests: double accumulation, libm
// exp, no vectorization, no threads.
#pragma once

#include <cstdint>

namespace kamera::ref {

void rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int dim, float eps);
void softmax(float* x, int n);
void silu_mul(float* gate, const float* up, int64_t n);
// Y[T x out] = X[T x in] * W[out x in]^T (+ bias[out])
void matmul_wt(const float* x, const float* w, const float* bias, float* y, int T, int in, int out);
// Causal attention of T queries (q: T x n_heads x head_dim, already rotated) over keys/values
// k, v: N x n_kv_heads x head_dim (already rotated); query t sees keys [0, first + t] minus the
// keys for which blocked(t, j) is true. out: T x n_heads x head_dim.
void attention(const float* q, const float* k, const float* v, float* out, int T, int N, int first,
               int n_heads, int n_kv_heads, int head_dim,
               bool (*blocked)(int t, int j, const void* ctx) = nullptr, const void* ctx = nullptr);

}  // namespace kamera::ref
