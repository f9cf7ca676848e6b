// A decoder-only transformer held in f32 (weights of any file dtype are dequantized on load), its
// configuration, and the loaders of the formats kamera reads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "kv/pool.h"
#include "model/tokenizer.h"
#include "ops/rope.h"

namespace kamera {

// How attention caches its keys and values (DESIGN.md §2: content | rope channels).
//   Gqa (MHA = GQA with one query head per KV head): channels k (rope) and v (content).
//   Mla (DeepSeek-V2): channels c_kv (the kv_lora_rank latent, content, shared by K and V) and
//     k_pe (qk_rope_head_dim, rope, shared by all heads).
enum class AttentionKind : uint8_t { Gqa, Mla };

// The decoder architectures kamera runs (GGUF general.architecture).
enum class Arch : uint8_t { Llama, Qwen2, Qwen2Vl, Deepseek2 };
const char* arch_name(Arch a);  // "llama", "qwen2", "qwen2vl", "deepseek2"
std::optional<Arch> arch_from_name(std::string_view name);
std::string arch_names();  // "llama, qwen2, qwen2vl, deepseek2"
inline bool is_qwen(Arch a) {
  return a == Arch::Qwen2 || a == Arch::Qwen2Vl;
}

struct MlaConfig {
  int q_lora_rank = 0;  // 0: plain q projection
  int kv_lora_rank = 0;
  int qk_nope_dim = 0;  // per head
  int qk_rope_dim = 0;  // per head, and the width of the shared k_pe
  int v_head_dim = 0;
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
  bool tied_output = true;  // output head shares the token embedding

  // head_dim is the query/key head width: for MLA qk_nope_dim + qk_rope_dim.
  int q_width() const { return n_heads * head_dim; }
  int kv_width() const { return n_kv_heads * head_dim; }  // GQA only
  int attn_out_width() const {  // width of the concatenated head outputs (input of wo)
    return attention == AttentionKind::Mla ? n_heads * mla.v_head_dim : n_heads * head_dim;
  }
  Status validate(const std::string& source) const;
};

// Shapes in comments are (rows, cols) of row-major f32 data; a weight (out, in) maps in -> out.
struct LayerWeights {
  std::vector<float> attn_norm;   // (dim)
  std::vector<float> wq;          // (n_heads*head_dim, dim)
  std::vector<float> wk;          // (n_kv_heads*head_dim, dim)
  std::vector<float> wv;          // (n_kv_heads*head_dim, dim)
  std::vector<float> bq, bk, bv;  // (q_width), (kv_width), (kv_width); empty without bias
  std::vector<float> wo;          // (dim, n_heads*head_dim)
  std::vector<float> ffn_norm;    // (dim)
  std::vector<float> w_gate;      // (ffn_dim, dim)   llama2.c w1, GGUF ffn_gate
  std::vector<float> w_down;      // (dim, ffn_dim)   llama2.c w2, GGUF ffn_down
  std::vector<float> w_up;        // (ffn_dim, dim)   llama2.c w3, GGUF ffn_up
  // MLA (attention == Mla); wq above is used when q_lora_rank == 0
  std::vector<float> wq_a;       // (q_lora_rank, dim)
  std::vector<float> q_a_norm;   // (q_lora_rank)
  std::vector<float> wq_b;       // (n_heads*(qk_nope+qk_rope), q_lora_rank)
  std::vector<float> wkv_a;      // (kv_lora_rank + qk_rope, dim): latent rows first, then k_pe
  std::vector<float> kv_a_norm;  // (kv_lora_rank)
  std::vector<float>
      wkv_b;  // (n_heads*(qk_nope+v_head), kv_lora_rank): per head K_nope rows, then V rows
};

struct Model {
  ModelConfig cfg;
  std::vector<float> tok_embd;  // (n_vocab, dim)
  std::vector<float> out_norm;  // (dim)
  std::vector<float> output;    // (n_vocab, dim); empty when tied to tok_embd
  std::vector<LayerWeights> layers;
  std::optional<Tokenizer> tokenizer;
  std::string source;                     // file it came from
  std::string format;                     // "gguf", "llama2c-v0", "llama2c-v1"
  std::array<uint64_t, 2> fingerprint{};  // XXH3-128 of config and weights

  const float* output_weight() const { return output.empty() ? tok_embd.data() : output.data(); }
  // Channels this model writes into the KV pool: "k" (rope, pre-rotation) and "v".
  KvLayout kv_layout() const;
};

struct LoadOptions {
  std::string tokenizer_path;  // llama2.c tokenizer.bin (llama2.c checkpoints carry none)
};

// Detects the format from the file's first bytes: "GGUF", llama2.c v1 ("ak42" magic), or a
// llama2.c legacy v0 header whose implied size matches the file. Errors name the file.
Result<std::unique_ptr<Model>> load_model(const std::string& path, const LoadOptions& opts = {});

// Parsers over bytes the caller owns (also the fuzz entry points).
Result<std::unique_ptr<Model>> load_llama2c_bytes(const uint8_t* data, size_t size,
                                                  const std::string& name);
Result<std::unique_ptr<Model>> load_gguf_model(const std::string& path);

// XXH3-128 over the config and every weight; set by the loaders.
std::array<uint64_t, 2> compute_fingerprint(const Model& m);

}  // namespace kamera
