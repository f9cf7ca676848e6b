// The mixture-of-experts FFN of DeepSeek-V2 and DeepSeek-V3 (GGUF arch deepseek2; Kimi-VL's and
// Moonlight's decoders are V3-shaped), as llama.cpp reads and runs it.
//
// A MoE layer replaces the dense SwiGLU FFN of one layer by
//   p      = softmax(W_router x) | sigmoid(W_router x)    (n_experts; gating)
//   s      = p + b                 the selection scores; b = exp_probs_b (V3's per-expert
//                                  correction bias) or 0. b picks experts, never weighs them
//   groups (n_groups > 1): the experts form n_groups equal runs; a group scores the sum of its
//            two largest s; only the n_groups_used best groups stay eligible (the others' s = -inf)
//   S      = the n_used experts of largest s (descending)
//   w_e    = p_e for e in S; divided by their sum (clamped below at 2^-14, as llama.cpp does)
//            when norm_weights; times weights_scale (routed_scaling_factor)
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
#include "model/weight.h"

namespace kamera {

class ThreadPool;

// gpt-oss's clamped SwiGLU constants (llama.cpp's LLM_FFN_SWIGLU_OAI_MOE)
inline constexpr float kOaiSwigluAlpha = 1.702f;
inline constexpr float kOaiSwigluLimit = 7.0f;

// How router logits become expert scores (GGUF expert_gating_func: 1 softmax, 2 sigmoid).
// SoftmaxWeight (llama.cpp's gating 3, gpt-oss, set by the architecture): the top n_used raw
// logits are chosen, and their weights are the softmax over those n_used logits alone.
enum class MoeGating : uint8_t { Softmax, Sigmoid, SoftmaxWeight };

struct MoeConfig {
  int n_experts = 0;           // routed experts (GGUF expert_count); 0: every FFN is dense
  int n_used = 0;              // experts per token (expert_used_count)
  int n_shared = 0;            // shared experts (expert_shared_count), one SwiGLU of n_shared * ffn
  int expert_ffn = 0;          // hidden width of one expert (expert_feed_forward_length)
  int n_dense_lead = 0;        // leading layers with the dense FFN (leading_dense_block_count)
  bool norm_weights = false;   // expert_weights_norm: the n_used weights sum to 1
  float weights_scale = 1.0f;  // expert_weights_scale (routed_scaling_factor)
  MoeGating gating = MoeGating::Softmax;  // expert_gating_func
  int n_groups = 1;                       // expert_group_count (n_group): 1 = no group limit
  int n_groups_used = 1;                  // expert_group_used_count (topk_group)
  bool selection_bias = false;  // every MoE layer has exp_probs_b (e_score_correction_bias)
  // gpt-oss: biases on the router and on every expert's gate, up and down rows, and the clamped
  // SwiGLU (ops/kernels.h swiglu_oai_mul) in place of silu(gate) * up.
  bool oai_experts = false;

  bool enabled() const { return n_experts > 0; }
  bool grouped() const { return n_groups > 1; }
  // Anything beyond DeepSeek-V2's softmax top-k (sigmoid, bias, groups).
  bool v3_routing() const { return gating == MoeGating::Sigmoid || selection_bias || grouped(); }
  bool is_moe_layer(int layer) const { return enabled() && layer >= n_dense_lead; }
  int shared_ffn() const { return n_shared * expert_ffn; }
};

// The matrices in their file's type (model/weight.h), shapes (rows, cols) as the GGUF stores them
// (ne reversed). A 3-D expert tensor is one Weight of n_experts * rows rows: expert e's matrix is
// the contiguous run of rows [e * rows, (e + 1) * rows), used in place (expert_view), so decode
// reads only the bytes of the experts it routes to. The router is held in its file's type too
// (llama.cpp's converter writes it F32).
struct MoeWeights {
  Weight router;                   // (n_experts, dim)                 ffn_gate_inp
  Weight gate_exps;                // (n_experts * expert_ffn, dim)    ffn_gate_exps
  Weight up_exps;                  // (n_experts * expert_ffn, dim)    ffn_up_exps
  Weight down_exps;                // (n_experts * dim, expert_ffn)    ffn_down_exps
  Weight gate_shexp;               // (n_shared * expert_ffn, dim)     ffn_gate_shexp
  Weight up_shexp;                 // (n_shared * expert_ffn, dim)     ffn_up_shexp
  Weight down_shexp;               // (dim, n_shared * expert_ffn)     ffn_down_shexp
  std::vector<float> exp_probs_b;  // (n_experts) selection bias, f32, or empty
  // gpt-oss (MoeConfig::oai_experts), f32: router bias (n_experts); expert e's gate and up
  // biases at [e * expert_ffn, (e + 1) * expert_ffn), its down bias at [e * dim, (e + 1) * dim).
  std::vector<float> router_b, gate_b, up_b, down_b;

  bool routed() const { return !router.empty(); }
  // Every matrix with its GGUF tensor suffix ("ffn_gate_inp"), empty ones included.
  template <class F>
  void for_each(F&& fn) const {
    fn("ffn_gate_inp", router);
    fn("ffn_gate_exps", gate_exps);
    fn("ffn_down_exps", down_exps);
    fn("ffn_up_exps", up_exps);
    fn("ffn_gate_shexp", gate_shexp);
    fn("ffn_down_shexp", down_shexp);
    fn("ffn_up_shexp", up_shexp);
  }
};

// Expert e's matrix of a 3-D expert weight holding n_experts stacked matrices: a view of its rows
// in the file's type (not owning; w must outlive it).
WeightView expert_view(const Weight& w, int n_experts, int e);

// Scratch of moe_ffn, grown on demand (one per engine).
struct MoeWorkspace {
  std::vector<float> probs;     // n x n_experts
  std::vector<float> select;    // n_experts selection scores of one row
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

// The routing of one row alone: from its gated scores probs (n_experts) and the selection bias
// (n_experts, or null), ids (n_used, descending selection score; ties keep the lower id) and
// their final weights. select: n_experts floats of scratch (null: allocated here).
void moe_route(const MoeConfig& c, const float* probs, int32_t* ids, float* weights,
               const float* bias = nullptr, float* select = nullptr);

}  // namespace kamera
