// A decoder-only transformer with its weights in their file's type (model/weight.h), its
// configuration (model/config.h), and the loaders of the formats kamera reads.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "kv/pool.h"
#include "model/config.h"
#include "model/moe.h"
#include "model/weight.h"
#include "ops/numerics.h"
#include "tokenizer/tokenizer.h"

namespace kamera {

// Shapes in comments are (rows, cols); a weight (out, in) maps in -> out. Matrices are Weights
// in the file's type (model/weight.h); norms and biases are f32.
struct LayerWeights {
  std::vector<float> attn_norm;       // (dim)
  Weight wq;                          // (n_heads*head_dim, dim)
  Weight wk;                          // (n_kv_heads*head_dim, dim)
  Weight wv;                          // (n_kv_heads*head_dim, dim)
  std::vector<float> bq, bk, bv;      // (q_width), (kv_width), (kv_width); empty without bias
  std::vector<float> q_norm, k_norm;  // (head_dim) each, qwen3 (cfg.qk_norm); empty otherwise
  Weight wo;                          // (dim, n_heads*head_dim)
  std::vector<float> ffn_norm;        // (dim)
  Weight w_gate;                      // (ffn_dim, dim)   llama2.c w1, GGUF ffn_gate
  Weight w_down;                      // (dim, ffn_dim)   llama2.c w2, GGUF ffn_down
  Weight w_up;                        // (ffn_dim, dim)   llama2.c w3, GGUF ffn_up
  // MLA (attention == Mla); wq above is used when q_lora_rank == 0
  Weight wq_a;                   // (q_lora_rank, dim)
  std::vector<float> q_a_norm;   // (q_lora_rank)
  Weight wq_b;                   // (n_heads*(qk_nope+qk_rope), q_lora_rank)
  Weight wkv_a;                  // (kv_lora_rank + qk_rope, dim): latent rows first, then k_pe
  std::vector<float> kv_a_norm;  // (kv_lora_rank)
  // (n_heads*(qk_nope+v_head), kv_lora_rank): per head K_nope rows, then V rows. Always F32 (one
  // copy dequantized at load): the absorbed attention multiplies by its K_nope part transposed.
  Weight wkv_b;
  MoeWeights moe;  // a MoE layer (moe.routed()): replaces w_gate, w_up, w_down
  // gemma3 (model/layer_kinds.h): norms of the attention output and of the FFN output (dim)
  std::vector<float> attn_post_norm, ffn_post_norm;
  // gpt-oss (model/gpt_oss.h): W_o's bias (dim) and one attention-sink logit per query head
  // (n_heads); empty otherwise
  std::vector<float> bo, attn_sinks;
};

struct Model {
  ModelConfig cfg;
  Weight tok_embd;              // (n_vocab, dim); rows dequantized when looked up
  std::vector<float> out_norm;  // (dim)
  Weight output;                // (n_vocab, dim); empty when tied to tok_embd
  std::vector<LayerWeights> layers;
  std::optional<Tokenizer> tokenizer;
  std::string source;                     // file it came from
  std::string format;                     // "gguf", "llama2c-v0", "llama2c-v1"
  std::array<uint64_t, 2> fingerprint{};  // XXH3-128 of config and weights
  std::shared_ptr<const void> mapping;    // keeps the mapped file the weights point into alive
  // The roundings its forward follows (ops/numerics.h; LoadOptions::numerics). Ggml marks every
  // Q8_0 matrix (kept in the file's layout) and rounds gemma3's GELU through f16; a fingerprint
  // taken under Ggml differs from the default's, so caches of the two never mix.
  Numerics numerics = Numerics::Kamera;

  const Weight& output_weight() const { return output.empty() ? tok_embd : output; }
  // Channels this model writes into the KV pool: "k" (rope, pre-rotation) and "v".
  KvLayout kv_layout() const;
  // Every weight matrix with its GGUF tensor name ("blk.3.ffn_down.weight"), file order.
  void for_each_weight(const std::function<void(const std::string&, const Weight&)>& fn) const;
  size_t weight_bytes() const;  // bytes of every matrix as held
  // Sets numerics and marks each Q8_0 matrix's view with it (before repack_for_decode, which
  // leaves marked matrices in the file's layout).
  void set_numerics(Numerics n);
};

struct LoadOptions {
  std::string tokenizer_path;  // llama2.c tokenizer.bin (llama2.c checkpoints carry none)
  // The context the model will run in (0: its trained context): picks LongRoPE's factor set
  // (phi3) as llama.cpp's n_ctx does.
  int64_t n_ctx = 0;
  // kamera's roundings, or ggml's CPU backend's where they differ (ops/numerics.h; --numerics).
  Numerics numerics = Numerics::Kamera;
};

// Detects the format from the file's first bytes: "GGUF", llama2.c v1 ("ak42" magic), or a
// llama2.c legacy v0 header whose implied size matches the file. Errors name the file.
Result<std::unique_ptr<Model>> load_model(const std::string& path, const LoadOptions& opts = {});

// Parsers over bytes the caller owns (also the fuzz entry points).
Result<std::unique_ptr<Model>> load_llama2c_bytes(const uint8_t* data, size_t size,
                                                  const std::string& name);
Result<std::unique_ptr<Model>> load_gguf_model(const std::string& path, int64_t n_ctx = 0,
                                               Numerics numerics = Numerics::Kamera);

// XXH3-128 over the config and every weight; set by the loaders.
std::array<uint64_t, 2> compute_fingerprint(const Model& m);

}  // namespace kamera
