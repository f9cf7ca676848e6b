// Element-wise and row kernels of the forward pass (fast paths). Each has a scalar reference in
// ops/reference.h and a test comparing the two. Fast paths are compiled for three x86 levels and
// picked at load by the CPU (ops/clones.h), so one binary runs on any x86-64.
#pragma once

#include <cstdint>

namespace kamera {

class ThreadPool;

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for n_rows rows of dim values. y may alias x.
void rmsnorm(const float* x, const float* w, float* y, int64_t n_rows, int dim, float eps,
             ThreadPool* pool = nullptr);

// In place softmax over n values.
void softmax(float* x, int n);

// In place softmax over n values whose maximum is mx (the caller found it in an earlier pass);
// extra_mass is added to the denominator (an attention sink's e^(sink - mx); 0: none).
void softmax_given_max(float* x, int n, float mx, float extra_mass = 0.0f);

// gpt-oss's clamped SwiGLU: with g = min(gate[i], limit), gate[i] = g / (1 + e^(-alpha g)) *
// (clamp(up[i], -limit, limit) + 1), in f32 as ggml's swiglu_oai.
void swiglu_oai_mul(float* gate, const float* up, int64_t n, float alpha, float limit);

// gate[i] = silu(gate[i]) * up[i] for n values (SwiGLU), silu(x) = x / (1 + e^-x).
void silu_mul(float* gate, const float* up, int64_t n, ThreadPool* pool = nullptr);

// gate[i] = gelu(gate[i]) * up[i] for n values (GEGLU, Gemma), with GELU's tanh form
// gelu(x) = x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), evaluated in f32 with tanhf.
void gelu_tanh_mul(float* gate, const float* up, int64_t n, ThreadPool* pool = nullptr);

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);

// sum_i a[i] * b[i]
float dot(const float* a, const float* b, int n);

// y[i] += alpha * x[i]
void axpy(float alpha, const float* x, float* y, int n);

// e^x for each of n values (vectorized polynomial, max error about 2 ULP over the f32 range).
void exp_inplace(float* x, int n);

}  // namespace kamera
