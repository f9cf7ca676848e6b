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

// Qwen3-VL: interleaved M-RoPE over [24, 20, 20] of the 64 pairs, theta 5e6, 3 deepstack layers.
void qwen3vl_common(ModelConfig& c) {
  qwen3_common(c);
  c.ctx_len = 262144;
  c.rope.theta = 5000000.0;
  c.rope.mrope = MropeMode::Interleaved;
  c.rope.sections = {24, 20, 20, 0};
  c.n_deepstack = 3;
}

// A released shape's widths (head_dim 128 from qwen3_common).
void widths(ModelConfig& c, int dim, int layers, int heads, int kv_heads, int ffn) {
  c.dim = dim;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.ffn_dim = ffn;
}

// Qwen3-30B-A3B's and Qwen3-VL-30B-A3B's decoder with `layers` of its 48: hidden 2048, 32 heads,
// 4 KV heads, head_dim 128, intermediate 6144, 128 experts of 768, 8 per token, norm_topk_prob
// true, untied head.
void a3b(ModelConfig& c, int layers) {
  widths(c, 2048, layers, 32, 4, 6144);
  c.moe = {128, 8, 0, 768, 0, true, 1.0f};
  c.tied_output = false;
}

}  // namespace

bool qwen3_preset(Arch arch, const std::string& preset, ModelConfig& c) {
  c.qk_norm = true;
  c.qkv_bias = false;
  if (is_qwen3vl(arch) && preset == "tiny") {
    // 3 layers, 2 of them fed deepstack slices; sections [6, 5, 5] over the 16 pairs of a 32
    // head: every pair is t's, h's or w's, so llama.cpp rotates as Hugging Face (model/qwen3vl.h)
    qwen3_preset(arch == Arch::Qwen3Vl ? Arch::Qwen3 : Arch::Qwen3Moe, "tiny", c);
    c.n_layers = 3;
    c.rope.mrope = MropeMode::Interleaved;
    c.rope.sections = {6, 5, 5, 0};
    c.n_deepstack = 2;
    return true;
  }
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
    widths(c, 1024, 28, 16, 8, 3072);
    return true;
  }
  if (arch == Arch::Qwen3Moe && preset == "30b-a3b-2l") {
    qwen3_common(c);
    a3b(c, 2);
    return true;
  }
  if (arch == Arch::Qwen3Vl && preset == "2b") {
    // Qwen3-VL-2B-Instruct (text_config): 28 layers, hidden 2048, 16 heads, 8 KV heads, head 128,
    // intermediate 6144, tied embeddings
    qwen3vl_common(c);
    widths(c, 2048, 28, 16, 8, 6144);
    return true;
  }
  if (arch == Arch::Qwen3VlMoe && preset == "30b-a3b-3l") {
    // Qwen3-VL-30B-A3B-Instruct (text_config) with the 3 of its 48 layers its deepstack feeds
    qwen3vl_common(c);
    a3b(c, 3);
    return true;
  }
  return false;
}

void write_qwen3moe_keys(GgufWriter& w, const ModelConfig& c) {
  const std::string a = arch_name(c.arch);
  const auto key = [&a](const char* s) { return gguf_key::arch_key(a, s); };
  if (is_qwen3vl(c.arch)) w.set_u32(key(gguf_key::kNumDeepstackLayers), uint32_t(c.n_deepstack));
  if (!is_qwen3_moe(c.arch)) return;
  w.set_u32(key(gguf_key::kExpertCount), uint32_t(c.moe.n_experts));
  w.set_u32(key(gguf_key::kExpertUsedCount), uint32_t(c.moe.n_used));
  w.set_u32(key(gguf_key::kExpertFeedForwardLength), uint32_t(c.moe.expert_ffn));
}

}  // namespace kamera
