#include "synthetic/qwen3_shapes.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"

namespace kamera {

namespace {

// Qwen3's common shape: GQA, NeoX rope over the whole head, theta 1e6, eps 1e-6, 151936 tokens.
void qwen3_common(ModelConfig& c) {
  c.n_vocab = 151936;
  c.ctx_len = 40960;
  c.rope.theta = 1000000.0;
  c.rms_eps = 1e-6f;
  c.head_dim = 128;
}

}  // namespace

bool qwen3_preset(Arch arch, const std::string& preset, ModelConfig& c) {
  c.qk_norm = true;
  c.qkv_bias = false;
  if (preset == "tiny") {
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 32;  // 4 x 32 = 128 query channels on a 64 residual, as Qwen3 does
    c.ffn_dim = 128;
    c.n_vocab = 512;
    c.ctx_len = 1024;
    if (arch == Arch::Qwen3Moe) {
      c.moe = {8, 2, 0, 32, 0, true, 1.0f};  // experts, used, shared, expert FFN, dense lead
      c.tied_output = false;
    }
    return true;
  }
  if (arch == Arch::Qwen3 && preset == "0.6b") {
    // Qwen3-0.6B (config.json): 28 layers, hidden 1024, 16 heads, 8 KV heads, head_dim 128,
    // intermediate 3072, tied embeddings
    qwen3_common(c);
    c.dim = 1024;
    c.n_layers = 28;
    c.n_heads = 16;
    c.n_kv_heads = 8;
    c.ffn_dim = 3072;
    return true;
  }
  if (arch == Arch::Qwen3Moe && preset == "30b-a3b-2l") {
    // Qwen3-30B-A3B (config.json) with 2 of its 48 layers: hidden 2048, 32 heads, 4 KV heads,
    // head_dim 128, intermediate 6144, 128 experts of 768, 8 per token, norm_topk_prob true,
    // untied head
    qwen3_common(c);
    c.dim = 2048;
    c.n_layers = 2;
    c.n_heads = 32;
    c.n_kv_heads = 4;
    c.ffn_dim = 6144;
    c.moe = {128, 8, 0, 768, 0, true, 1.0f};
    c.tied_output = false;
    return true;
  }
  return false;
}

void write_qwen3moe_keys(GgufWriter& w, const ModelConfig& c) {
  const auto key = [](const char* s) { return gguf_key::arch_key(arch_name(Arch::Qwen3Moe), s); };
  w.set_u32(key(gguf_key::kExpertCount), uint32_t(c.moe.n_experts));
  w.set_u32(key(gguf_key::kExpertUsedCount), uint32_t(c.moe.n_used));
  w.set_u32(key(gguf_key::kExpertFeedForwardLength), uint32_t(c.moe.expert_ffn));
}

}  // namespace kamera
