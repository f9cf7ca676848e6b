// GELU as ggml's CPU backend computes it (Numerics::Ggml, ops/numerics.h): llama.cpp's gemma3
// FFN (GEGLU) looks its input up in an f16 table (GGML_GELU_FP16 in ggml-cpu's vec.h), so its
// input and its result are rounded to f16; kamera's default gelu_tanh_mul (ops/kernels.h) keeps
// f32, as the model's gelu_pytorch_tanh defines it.
#pragma once

#include <cstdint>

namespace kamera {

class ThreadPool;

// The table's entry for the f16 value h: f16(gelu(f32(h))), gelu(x) = 0.5 x (1 + tanhf(c x
// (1 + a x x))), c = sqrt(2 / pi), a = 0.044715, with (a x) x + 1 as one fma (how GCC builds ggml's
// ggml_gelu_f32 with -march=native: tests/data/ggml_gelu/README.md), f16 rounded to nearest even.
uint16_t ggml_gelu_f16(uint16_t h);

// gate[i] = G(gate[i]) * up[i] for n values: G(x) = 0 for x <= -10, x for x >= 10, else the table's
// entry for f16(x) in f32 (ggml_vec_geglu_f32).
void gelu_tanh_mul_ggml(float* gate, const float* up, int64_t n, ThreadPool* pool = nullptr);

}  // namespace kamera
