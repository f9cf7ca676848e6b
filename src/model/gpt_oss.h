// gpt-oss (GGUF general.architecture "gpt-oss", llama.cpp's LLM_ARCH_OPENAI_MOE) as llama.cpp
// d32676d reads and runs it (src/models/openai-moe.cpp, build_moe_ffn in src/llama-graph.cpp,
// conversion/gpt_oss.py for what the converter writes).
//
// Keys besides the llama set (embedding_length, block_count, attention.head_count(_kv),
// key_length, feed_forward_length, context_length, rope.freq_base, layer_norm_rms_epsilon):
//   expert_count, expert_used_count, expert_feed_forward_length;
//   attention.sliding_window W (required), attention.sliding_window_pattern P (absent: 2);
//   rope.freq_base_swa (absent: rope.freq_base);
//   rope.scaling.type = yarn with factor, original_context_length, yarn_beta_fast and
//   yarn_beta_slow (absent: 32, 1), rope.scaling.attn_factor (absent: 1); or no scaling.
// Layer il is sliding-window (LayerKind::Local) when il % P < P - 1 (the even layers for P = 2)
// and full (Global) otherwise. Both kinds rope with NeoX pairs and the same YaRN frequencies
// (llama.cpp keeps freq_scale on SWA layers: LayerKinds::local_scaled).
//
// Per layer:
//   h = attn_norm(x); q, k, v = W h + b; NeoX rope;
//   scores q.k * s with s = mscale^2 / sqrt(head_dim), mscale = attn_factor * (1 + 0.1 ln factor)
//     under YaRN (ggml's rope multiplies q's and k's cos and sin by mscale; kamera puts it in the
//     score scale, so cached keys stay a pure rotation of position-free rows);
//   softmax over the visible keys and the head's sink logit attn_sinks[h] (unscaled, no value:
//     the weights sum to less than 1); x += W_o att + b_o;
//   h = post_attention_norm(x) (the FFN's pre-norm, under that name in the file);
//   router r = W_r h + b_r; the n_used largest r chosen; weights = softmax over the chosen r;
//   expert e: g = W_g h + b_g, u = W_u h + b_u,
//     a = min(g, 7) * sigmoid(1.702 min(g, 7)) * (clamp(u, -7, 7) + 1), y_e = W_d a + b_d;
//   x += sum of w_e y_e.
// Head: output_norm, output (never tied in the converter's files).
//
// Reuse: keys are cached before the rotation and the YaRN magnitude is in the score scale, so a
// relocated segment is re-rotated exactly as on llama; the sinks are per head and carry no
// position, so they are the same wherever a segment lands; Local layers read only keys within W
// positions of the query (the pool keeps every layer's rows, as --swa-full).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/model.h"

namespace kamera {

class GgufFile;

inline constexpr int kGptOssDefaultSwaPattern = 2;

// The gpt-oss keys of f into c (after the shape and the rope base are read).
Status read_gpt_oss_hparams(const GgufFile& f, ModelConfig& c);

// gpt-oss's layer kinds: Local when il % pattern < pattern - 1, Global otherwise.
std::vector<LayerKind> gpt_oss_layer_kinds(int n_layers, int pattern);

// The score scale under YaRN factor `factor` (1: none) and rope.scaling.attn_factor.
float gpt_oss_attn_scale(double factor, double attn_factor, int head_dim);

// Every f32 vector of a gpt-oss layer with its GGUF name suffix and shape (ne order): the
// attention biases, the sinks, the FFN norm, the router's and the experts' biases.
struct GptOssVector {
  std::string suffix;  // "attn_sinks.weight"
  std::vector<int64_t> ne;
  std::vector<float>* dst;
};
std::vector<GptOssVector> gpt_oss_layer_vectors(const ModelConfig& c, LayerWeights& l);

// "attention_sinks (...)", "mxfp4_experts" ... for `kamera info -m` (nothing for other arches).
void add_gpt_oss_features(const ModelConfig& c, std::vector<std::string>& out);

}  // namespace kamera
