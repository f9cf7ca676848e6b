// The mixture-of-experts FFN of DeepSeek-V2 (GGUF arch deepseek2), as llama.cpp reads and runs it.
//
// A MoE layer replaces the dense SwiGLU FFN of one layer by
//   p      = softmax(W_router x)                          (n_experts)
//   S      = the n_used experts of largest p (descending)
//   w_e    = p_e for e in S; divided by their sum when norm_weights; times weights_scale
//   out    = sum over S, in that order, of w_e * SwiGLU_e(x)   +   SwiGLU_shared(x)
// where SwiGLU_e(x) = W_down_e (silu(W_gate_e x) * W_up_e x) with hidden width expert_ffn, and the
// shared experts are one SwiGLU of width n_shared * expert_ffn (llama.cpp's *_shexp tensors). The
// first n_dense_lead layers keep the dense FFN (feed_forward_length).
//
// Batched rows are grouped by expert: each expert gathers the rows routed to it, runs one GEMM per
// projection, and its weighted outputs are written to (row, slot); rows then sum their slots in
// slot order. A row's result therefore does not depend on the order of the batch, and decode (one
// row) runs only its n_used experts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace kamera {

class ThreadPool;

struct MoeConfig {
  int n_experts = 0;           // routed experts (GGUF expert_count); 0: every FFN is dense
  int n_used = 0;              // experts per token (expert_used_count)
  int n_shared = 0;            // shared experts (expert_shared_count), one SwiGLU of n_shared * ffn
  int expert_ffn = 0;          // hidden width of one expert (expert_feed_forward_length)
  int n_dense_lead = 0;        // leading layers with the dense FFN (leading_dense_block_count)
  bool norm_weights = false;   // expert_weights_norm: the n_used weights sum to 1
  float weights_scale = 1.0f;  // expert_weights_scale (routed_scaling_factor)

  bool enabled() const { return n_experts > 0; }
  bool is_moe_layer(int layer) const { return enabled() && layer >= n_dense_lead; }
  int shared_ffn() const { return n_shared * expert_ffn; }
};

// Shapes (rows, cols) of row-major f32 data, as the GGUF stores them (ne reversed).
struct MoeWeights {
  std::vector<float> router;      // (n_experts, dim)                 ffn_gate_inp
  std::vector<float> gate_exps;   // (n_experts, expert_ffn, dim)     ffn_gate_exps
  std::vector<float> up_exps;     // (n_experts, expert_ffn, dim)     ffn_up_exps
  std::vector<float> down_exps;   // (n_experts, dim, expert_ffn)     ffn_down_exps
  std::vector<float> gate_shexp;  // (n_shared * expert_ffn, dim)     ffn_gate_shexp
  std::vector<float> up_shexp;    // (n_shared * expert_ffn, dim)     ffn_up_shexp
  std::vector<float> down_shexp;  // (dim, n_shared * expert_ffn)     ffn_down_shexp

  bool routed() const { return !router.empty(); }
};

// Scratch of moe_ffn, grown on demand (one per engine).
struct MoeWorkspace {
  std::vector<float> probs;     // n x n_experts
  std::vector<int32_t> chosen;  // n x n_used expert ids, descending probability
  std::vector<float> weights;   // n x n_used
  std::vector<int32_t> rows;    // rows routed to one expert, as row * n_used + slot
  std::vector<float> xe, gate, up;
  std::vector<float> slots;  // n x n_used x dim weighted expert outputs
};

// Checks the MoE part of a model config (source names the file in messages).
Status validate_moe(const MoeConfig& c, int n_layers, const std::string& source);

// out (n x dim) = routed experts + shared experts of the n normed rows x (n x dim).
void moe_ffn(const MoeConfig& c, const MoeWeights& w, int dim, const float* x, int n, float* out,
             MoeWorkspace& ws, ThreadPool& pool);

// The routing of one row alone: ids (n_used, descending probability) and their final weights.
void moe_route(const MoeConfig& c, const float* probs, int32_t* ids, float* weights);

}  // namespace kamera
