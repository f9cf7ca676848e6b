// DeepSeek-V2 and -V3 (Kimi-VL's and Moonlight's decoders) beyond their MLA attention: the
// mixture-of-experts FFN's GGUF keys and tensors, YaRN rope scaling and its attention scale, and
// the tensor names the loader reads (make-model's shapes of it: synthetic/deepseek2_shapes.h).
// Keys, tensor names and the arithmetic follow llama.cpp (V2: c392e50; V3 routing: d32676d):
//
//   {arch}.leading_dense_block_count        dense FFN layers before the MoE layers
//   {arch}.expert_count / expert_used_count routed experts, experts per token (top-k)
//   {arch}.expert_shared_count              shared experts (one SwiGLU of count x expert width)
//   {arch}.expert_feed_forward_length       hidden width of one expert
//   {arch}.expert_weights_norm              renormalize the top-k weights (default false)
//   {arch}.expert_weights_scale             multiply them (routed_scaling_factor; 0, absent: 1)
//   {arch}.expert_gating_func               1 softmax (0, absent: softmax), 2 sigmoid (V3);
//                                           3 (softmax of the chosen) and 4 (sqrt-softplus):
//                                           refused
//   {arch}.expert_group_count               n_group: experts in equal groups (0, 1: none)
//   {arch}.expert_group_used_count          topk_group: groups kept per token (sum of each
//                                           group's two best selection scores)
//   blk.N.ffn_gate_inp, ffn_{gate,up,down}_exps (3-D: ne = {in, out, expert}),
//   ffn_{gate,up,down}_shexp
//   blk.N.exp_probs_b.bias                  {expert} f32: V3's e_score_correction_bias, added to
//                                           the scores to choose experts, never to weigh them;
//                                           in every MoE layer or in none
//   {arch}.rope.scaling.type = yarn, .factor, .original_context_length, .yarn_log_multiplier,
//   .attn_factor
//
// YaRN on deepseek2: the rotary pairs take YaRN's frequencies (ops/rope.h, YarnRamp; ext_factor 1,
// beta_fast 32, beta_slow 1). llama.cpp hands the rope a magnitude of 1 / (1 + 0.1 ln factor)
// that YaRN's own correction (1 + 0.1 ln factor) cancels, so the rotation keeps unit magnitude,
// and scales the scores instead: kq_scale = mscale^2 / sqrt(qk_nope + qk_rope) with
// mscale = attn_factor * (1 + yarn_log_multiplier * ln factor) (the converter writes
// yarn_log_multiplier = 0.1 * mscale_all_dim, so this is Hugging Face's yarn_get_mscale squared).
//
// MLA in a file, two layouts (both load to the same model: MlaConfig::file_layout says which):
//   Split (llama.cpp's convert_hf_to_gguf.py since its MLA rework, d32676d): head_count_kv = 1,
//     key_length = kv_lora_rank + qk_rope, value_length = kv_lora_rank (the widths of the one
//     "MQA" head it attends with), key_length_mla = qk_nope + qk_rope, value_length_mla = v_head
//     (the per-head widths), and kv_b_proj split per head into
//       blk.N.attn_k_b.weight  ne {qk_nope, kv_lora, heads}  (W_kb of each head, transposed)
//       blk.N.attn_v_b.weight  ne {kv_lora, v_head, heads}   (W_vb of each head)
//   KvB (before it): head_count_kv = heads, key_length = qk_nope + qk_rope, value_length = v_head,
//     blk.N.attn_kv_b.weight ne {kv_lora, heads * (qk_nope + v_head)} (each head's qk_nope rows
//     then its v_head rows).
//   A file with one of key_length_mla / value_length_mla and not the other, or with them and
//   other head counts or widths than above, is refused naming the key.
//
// Refused with a message: gating functions 3 and 4, linear rope scaling on deepseek2 (llama.cpp
// shrinks only the rope band there), a shared-expert width other than count x expert width, an
// exp_probs_b in some MoE layers only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/moe.h"

namespace kamera {

class GgufFile;
class GgufWriter;

// MoE and rope-scaling keys of a deepseek2 file into c (after its layer count and context).
Status read_deepseek2_hparams(const GgufFile& f, ModelConfig& c);

// The file's MLA layout (above), after read_shape took head_count_kv, key_length, rope dims and
// c.mla.kv_lora_rank was read: sets c.mla.file_layout, c.mla.v_head_dim and the per-head
// c.head_dim, c.n_kv_heads = c.n_heads.
Status read_mla_layout(const GgufFile& f, ModelConfig& c);

// attn_k_b and attn_v_b (Split, as f32) joined into attn_kv_b's rows (KvB), and back: the values
// are moved, never changed. split_mla_kv_b writes either destination when not null.
std::vector<float> join_mla_kv_b(const MlaConfig& m, int n_heads, const std::vector<float>& k_b,
                                 const std::vector<float>& v_b);
void split_mla_kv_b(const MlaConfig& m, int n_heads, const float* kv_b, float* k_b, float* v_b);

// Reads tensor `name` with GGUF shape ne (ne[0] contiguous) into dst in its file type, or fails
// naming it; a 3-D tensor {cols, rows, n} is one Weight of n * rows rows.
using TensorReader =
    std::function<Status(const std::string& name, std::vector<int64_t> ne, Weight& dst)>;
// The MoE matrices of layer `layer` (c.moe.is_moe_layer(layer)); the caller reads the 1-D
// exp_probs_b (moe_layer_tensors lists it last when c.moe.selection_bias).
Status read_moe_layer(const GgufFile& f, const ModelConfig& c, int layer, const TensorReader& read,
                      MoeWeights& w);

struct MoeTensorSpec {
  std::string name;
  std::vector<int64_t> ne;
  bool keep_f32;  // the router stays f32 in quantized files, as llama.cpp's converter keeps it
};
std::vector<MoeTensorSpec> moe_layer_tensors(const ModelConfig& c, int layer);

// Score scale of MLA attention: 1 / sqrt(head_dim), times mscale^2 under YaRN (see above).
float mla_kq_scale(const ModelConfig& c);

}  // namespace kamera
