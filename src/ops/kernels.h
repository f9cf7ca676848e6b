// Element-wise and row kernels of the forward pass (fast paths). Each has a scalar reference in
// ops/reference.h and a test comparing the two. Fast paths are compiled twice (x86-64-v3 with
// AVX2+FMA, and baseline x86-64) and picked at run time, so one binary runs on any x86-64.
#pragma once

#include <cstdint>

namespace kamera {

class ThreadPool;

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for n_rows rows of dim values. y may alias x.
void rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int dim, float eps,
             ThreadPool* pool = nullptr);

// In place softmax over n values.
void softmax(float* x, int n);

// gate[i] = silu(gate[i]) * up[i] for n values (SwiGLU), silu(x) = x / (1 + e^-x).
void silu_mul(float* gate, const float* up, int64_t n, ThreadPool* pool = nullptr);

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);

// sum_i a[i] * b[i]
float dot(const float* a, const float* b, int n);

// y[i] += alpha * x[i]
void axpy(float alpha, const float* x, float* y, int n);

// e^x for each of n values (vectorized polynomial, max error about 2 ULP over the f32 range).
void exp_inplace(float* x, int n);

}  // namespace kamera
