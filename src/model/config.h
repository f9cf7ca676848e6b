// A decoder's configuration: architecture, attention family, shapes, rope, MoE. Plain data, read
// from a file's metadata by the loaders (model/model.h) and written by make-model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/moe.h"
#include "ops/rope.h"

namespace kamera {

// How attention caches its keys and values (docs/DESIGN.md §2: content | rope channels).
//   Gqa (MHA = GQA with one query head per KV head): channels k (rope) and v (content).
//   Mla (DeepSeek-V2): channels c_kv (the kv_lora_rank latent, content, shared by K and V) and
//     k_pe (qk_rope_head_dim, rope, shared by all heads).
enum class AttentionKind : uint8_t { Gqa, Mla };

// The decoder architectures kamera runs (GGUF general.architecture).
enum class Arch : uint8_t {
  Llama,
  Qwen2,
  Qwen2Vl,
  Deepseek2,
  Qwen3,
  Qwen3Moe,
  Qwen3Vl,
  Qwen3VlMoe,
  Smollm3,
  Gemma3,
  Phi3,   // Phi-3, Phi-4-mini: fused qkv and gate+up, partial rotary, LongRoPE (model/phi3.h)
  GptOss  // gpt-oss: MoE with biases, attention sinks, SWA/full alternation (model/gpt_oss.h)
};
// "llama", "qwen2", "qwen2vl", "deepseek2", "qwen3", "qwen3moe", "qwen3vl", "qwen3vlmoe",
// "smollm3", "gemma3", "phi3", "gpt-oss"
const char* arch_name(Arch a);
std::optional<Arch> arch_from_name(std::string_view name);
std::string arch_names();       // the names above, comma-separated
inline bool is_qwen2(Arch a) {  // q/k/v biases, llama.cpp requires them
  return a == Arch::Qwen2 || a == Arch::Qwen2Vl;
}
inline bool is_qwen3vl(Arch a) {  // interleaved M-RoPE and deepstack inputs (model/qwen3vl.h)
  return a == Arch::Qwen3Vl || a == Arch::Qwen3VlMoe;
}
inline bool is_qwen3(Arch a) {  // per-head q/k RMSNorm before the rope (model/qwen3.h)
  return a == Arch::Qwen3 || a == Arch::Qwen3Moe || is_qwen3vl(a);
}
inline bool is_qwen3_moe(Arch a) {  // softmax top-k experts in every layer (model/qwen3.h)
  return a == Arch::Qwen3Moe || a == Arch::Qwen3VlMoe;
}
inline bool is_gemma3(Arch a) {  // post norms, GELU gate, scaled embedding (model/layer_kinds.h)
  return a == Arch::Gemma3;
}
inline bool is_mrope(Arch a) {  // positions (t, h, w): the Qwen-VL decoders
  return a == Arch::Qwen2Vl || is_qwen3vl(a);
}
inline bool is_qwen(Arch a) {  // the NeoX rope layout
  return is_qwen2(a) || is_qwen3(a);
}
inline bool is_gpt_oss(Arch a) {  // sinks, o bias, expert biases, clamped SwiGLU (model/gpt_oss.h)
  return a == Arch::GptOss;
}
inline bool is_neox_rope(Arch a) {
  return is_qwen(a) || a == Arch::Phi3 || is_gpt_oss(a);
}

// How a GGUF file writes MLA (model/deepseek2.h); both load to the same model (wkv_b per head:
// qk_nope rows then v_head rows of kv_lora).
enum class MlaFileLayout : uint8_t {
  Split,  // llama.cpp's converter since its MLA rework: one KV head, attn_k_b / attn_v_b
  KvB,    // before it: head_count_kv = heads, attn_kv_b
};

// How one layer's attention sees positions (model/layer_kinds.h):
//   Global: keys rotated by the model's rope, every earlier key read (all layers of most models);
//   NoRope: no rotation at all (SmolLM3's every fourth layer): keys and queries position-free;
//   Local:  rotated by the local rope (its own base, no scaling), and a key is read only when
//           the query's position is less than `window` past it (Gemma 3's sliding-window layers).
enum class LayerKind : uint8_t { Global, NoRope, Local };
struct LayerKinds {
  std::vector<LayerKind> kinds;  // one per layer; empty: every layer Global
  int window = 0;                // Local layers' sliding window (positions)
  double local_theta = 10000.0;  // Local layers' rope base
  // Local layers keep the model's rope scaling (YaRN) as llama.cpp's gpt-oss does; false: they
  // rope unscaled (gemma3).
  bool local_scaled = false;
  LayerKind at(int layer) const { return kinds.empty() ? LayerKind::Global : kinds[layer]; }
  bool any(LayerKind k) const;
};

struct MlaConfig {
  int q_lora_rank = 0;  // 0: plain q projection
  int kv_lora_rank = 0;
  int qk_nope_dim = 0;  // per head
  int qk_rope_dim = 0;  // per head, and the width of the shared k_pe
  int v_head_dim = 0;
  MlaFileLayout file_layout = MlaFileLayout::Split;  // the file's, not the model's
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  AttentionKind attention = AttentionKind::Gqa;
  MlaConfig mla;
  int n_vocab = 0;
  int dim = 0;  // residual width (embedding_length)
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;  // == n_heads for MHA, fewer for GQA
  int head_dim = 0;
  int ffn_dim = 0;  // SwiGLU hidden width (feed_forward_length)
  int ctx_len = 0;  // trained context (positions past it are allowed but flagged by the CLI)
  float rms_eps = 1e-5f;
  RopeDesc rope;
  bool qkv_bias = false;    // qwen2
  bool qk_norm = false;     // qwen3: RMSNorm of every q and k head (head_dim weights) pre-rope
  bool tied_output = true;  // output head shares the token embedding
  MoeConfig moe;            // deepseek2: routed and shared experts (model/moe.h)
  double yarn_log_mul = 0;  // deepseek2 YaRN: attention mscale (model/deepseek2.h)
  double yarn_attn_factor = 1;
  LongRope longrope;  // phi3: both factor sets; rope.freq_factors holds the chosen one
  // qwen3vl: embedding rows carry 1 + n_deepstack slices of dim values; slice k + 1 is added to
  // the hidden state after layer k (model/qwen3vl.h). Token rows carry none.
  int n_deepstack = 0;
  // Per-layer rope kinds and the sliding window (smollm3, gemma3; model/layer_kinds.h).
  LayerKinds layer_kinds;
  // gemma3 (model/layer_kinds.h): token rows scaled by sqrt(dim), post-attention and post-FFN
  // norms, GELU (tanh) gate; queries scaled by attn_scale (0: 1 / sqrt(head_dim)); logits
  // soft-capped by final_softcap (0: none).
  float attn_scale = 0;
  float final_softcap = 0;

  // head_dim is the query/key head width: for MLA qk_nope_dim + qk_rope_dim.
  int q_width() const { return n_heads * head_dim; }
  int kv_width() const { return n_kv_heads * head_dim; }  // GQA only
  // Width of an embedding row given to the forward: dim, times 1 + n_deepstack (qwen3vl)
  int input_width() const { return dim * (1 + n_deepstack); }
  int attn_out_width() const {  // width of the concatenated head outputs (input of wo)
    return attention == AttentionKind::Mla ? n_heads * mla.v_head_dim : n_heads * head_dim;
  }
  Status validate(const std::string& source) const;
};

// What `kamera info -m` lists: "gqa" or "mla" (with "mla_layout ..."), "qkv_bias", "qk_norm",
// "moe (E experts, k used, ...)", "mrope (...)", "deepstack (N layers)", "yarn",
// "partial_rotary (...)", "longrope (...)", "tied_output", and the layer kinds
// (model/layer_kinds.h: "nope (...)", "sliding_window (...)", gemma3's norms and scales).
std::vector<std::string> model_features(const ModelConfig& c);

// Chooses c.longrope's factor set for a context of n_ctx tokens (0: the trained context) into
// c.rope.freq_factors; nothing without LongRoPE.
void select_rope_context(ModelConfig& c, int64_t n_ctx);

}  // namespace kamera
