// Kernels the Qwen-VL family's vision towers need beyond the decoder's (ops/kernels.h): LayerNorm,
// the three GELUs, 2-D vision RoPE, and bidirectional attention over groups of tokens through
// OpenBLAS. Each has a scalar reference in tests (tests/unit/vision/test_qwen_vision.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kamera {

class ThreadPool;

// y[r] = (x[r] - mean) / sqrt(var + eps) * w + b (b may be null), n_rows rows of dim values;
// y may alias x. Mean and variance in double.
void layernorm(const float* x, const float* w, const float* b, float* y, int64_t n_rows, int dim,
               float eps, ThreadPool* pool = nullptr);

// x = x * Phi(x) (exact, erf), as torch.nn.GELU() computes it.
void gelu_erf_inplace(float* x, int64_t n, ThreadPool* pool = nullptr);
// x = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hugging Face "gelu_pytorch_tanh").
void gelu_tanh_inplace(float* x, int64_t n, ThreadPool* pool = nullptr);
// x = x * sigmoid(1.702 x) (Hugging Face "quick_gelu").
void quick_gelu_inplace(float* x, int64_t n, ThreadPool* pool = nullptr);

// 2-D rotary embedding of the Qwen2-VL vision tower, in place on n tokens of n_heads heads of
// head_dim values (head_dim % 4 == 0). Pair k = dims (k, k + head_dim/2) turns by
//   h[token] * theta^(-4k/head_dim)            for k <  head_dim/4
//   w[token] * theta^(-4(k - head_dim/4)/head_dim) for k >= head_dim/4
// i.e. torch's rotate_half with the h and w frequency halves of VisionRotaryEmbedding(head_dim/2).
void vision_rope(float* x, int n, int n_heads, int head_dim, std::span<const int32_t> h,
                 std::span<const int32_t> w, double theta, ThreadPool* pool = nullptr);

// Bidirectional multi-head attention inside groups: token i attends to token j iff both lie in
// the same group. q, k, v, out: n x (n_heads * head_dim) rows. `groups` lists token indices, one
// group after another; group g is members[offsets[g] .. offsets[g + 1]). Scores are scaled by
// 1/sqrt(head_dim). Products go through OpenBLAS; `scratch` grows as needed.
struct AttentionGroups {
  std::span<const int32_t> members;
  std::span<const int32_t> offsets;  // n_groups + 1
};
void grouped_attention(const float* q, const float* k, const float* v, float* out, int n,
                       int n_heads, int head_dim, const AttentionGroups& groups,
                       std::vector<float>& scratch, ThreadPool* pool = nullptr);

}  // namespace kamera
