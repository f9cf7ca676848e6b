// deepseek2's shapes in make-model: the MoE and YaRN presets, the "key=value" overrides, the
// metadata keys written for them (as model/deepseek2.cpp reads them back) and the notes on what
// llama.cpp refuses.
#include "synthetic/deepseek2_shapes.h"

#include <algorithm>

#include "gguf/gguf.h"
#include "gguf/keys.h"

namespace kamera {

namespace {

std::string key(const char* suffix) {
  return gguf_key::arch_key(arch_name(Arch::Deepseek2), suffix);
}

}  // namespace

void write_deepseek2_keys(GgufWriter& w, const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  // llama.cpp reads these for every deepseek2 file, MoE or not
  w.set_u32(key(gguf_key::kLeadingDenseBlockCount),
            uint32_t(m.enabled() ? m.n_dense_lead : c.n_layers));
  w.set_u32(key(gguf_key::kExpertFeedForwardLength),
            uint32_t(m.enabled() ? m.expert_ffn : c.ffn_dim));
  w.set_u32(key(gguf_key::kExpertCount), uint32_t(m.n_experts));
  w.set_u32(key(gguf_key::kExpertSharedCount), uint32_t(m.n_shared));
  w.set_f32(key(gguf_key::kExpertWeightsScale), m.enabled() ? m.weights_scale : 1.0f);
  w.set_f32(key(gguf_key::kRopeScalingYarnLogMul), float(c.yarn_log_mul));
  if (m.enabled()) {
    w.set_u32(key(gguf_key::kExpertUsedCount), uint32_t(m.n_used));
    w.set_bool(key(gguf_key::kExpertWeightsNorm), m.norm_weights);
    w.set_u32(key(gguf_key::kExpertGatingFunc), m.gating == MoeGating::Sigmoid ? 2 : 1);
    if (m.v3_routing()) {  // as llama.cpp's converter writes n_group and topk_group
      w.set_u32(key(gguf_key::kExpertGroupCount), uint32_t(m.n_groups));
      w.set_u32(key(gguf_key::kExpertGroupUsedCount), uint32_t(m.n_groups_used));
    }
  }
  if (c.rope.yarn.ext_factor != 0.0) {
    w.set_string(key(gguf_key::kRopeScalingType), "yarn");
    w.set_f32(key(gguf_key::kRopeScalingFactor), float(1.0 / c.rope.freq_scale));
    w.set_u32(key(gguf_key::kRopeScalingOrigCtx), uint32_t(c.rope.yarn.orig_ctx));
    if (c.yarn_attn_factor != 1.0)
      w.set_f32(key(gguf_key::kRopeScalingAttnFactor), float(c.yarn_attn_factor));
  }
}

namespace {

// Kimi-VL's decoder (Moonlight-16B-A3B's shape, DeepSeek-V3 routing): "kimi-vl-tiny" on top of
// the tiny MLA shape, "kimi-vl-a3b" as released.
bool kimi_preset(const std::string& preset, ModelConfig& c) {
  MoeConfig& m = c.moe;
  if (preset == "kimi-vl-tiny") {  // on top of the tiny MLA shape (q_lora kept: see the header)
    c.n_layers = 3;
    c.rope.theta = 800000.0;
    m = {8, 2, 2, 32, 1, true, 2.446f};
  } else if (preset == "kimi-vl-a3b") {
    // Kimi-VL-A3B's text_config (Moonlight-16B-A3B): 27 layers, hidden 2048, 16 heads, no q
    // low-rank, kv_lora_rank 512, qk_nope 128, qk_rope 64, v_head 128, vocab 163840, rms eps
    // 1e-5, rope theta 800000, no rope scaling; first_k_dense_replace 1 (intermediate 11264), 64
    // routed experts of 1408, 6 per token, 2 shared, norm_topk_prob true, routed_scaling_factor
    // 2.446, n_group 1, topk_group 1, scoring_func sigmoid with e_score_correction_bias
    c.dim = 2048;
    c.n_layers = 27;
    c.n_heads = 16;
    c.n_vocab = 163840;
    c.rms_eps = 1e-5f;
    c.mla = {0, 512, 128, 64, 128};
    c.tied_output = false;
    c.ffn_dim = 11264;
    c.ctx_len = 131072;
    c.rope.theta = 800000.0;
    m = {64, 6, 2, 1408, 1, true, 2.446f};
  } else {
    return false;
  }
  m.gating = MoeGating::Sigmoid;
  m.selection_bias = true;
  m.n_groups = m.n_groups_used = 1;
  return true;
}

}  // namespace

bool deepseek2_preset(const std::string& preset, ModelConfig& c) {
  if (preset == "tiny-moe") {  // on top of the tiny MLA shape
    c.n_layers = 3;
    c.moe = {8, 2, 1, 32, 1, false, 1.0f};  // experts, used, shared, expert FFN, dense lead
    c.rope.freq_scale = 1.0 / 4;
    c.rope.yarn = {1.0, 256, 32.0, 1.0};
    c.yarn_log_mul = 0.0707;  // 0.1 * mscale_all_dim, as V2-Lite
    return true;
  }
  if (kimi_preset(preset, c)) return true;
  if (preset != "lite" && preset != "lite-attn") return false;
  // DeepSeek-V2-Lite (config.json): 27 layers, hidden 2048, 16 heads, no q low-rank,
  // kv_lora_rank 512, qk_nope 128, qk_rope 64, v_head 128, vocab 102400, rms eps 1e-6
  c.dim = 2048;
  c.n_layers = 27;
  c.n_heads = 16;
  c.n_vocab = 102400;
  c.rms_eps = 1e-6f;
  c.mla = {0, 512, 128, 64, 128};
  c.tied_output = false;
  if (preset == "lite-attn") {  // its attention, one dense FFN at the expert width
    c.ffn_dim = 1408;
    c.ctx_len = 32768;
    return true;
  }
  // first_k_dense_replace 1 (intermediate 10944), 64 routed experts of 1408, 6 per token,
  // 2 shared, norm_topk_prob false, routed_scaling_factor 1; YaRN factor 40 over 4096 positions
  // (max_position_embeddings 163840), mscale_all_dim 0.707
  c.ffn_dim = 10944;
  c.ctx_len = 163840;
  c.moe = {64, 6, 2, 1408, 1, false, 1.0f};
  c.rope.freq_scale = 1.0 / 40;
  c.rope.yarn = {1.0, 4096, 32.0, 1.0};
  c.yarn_log_mul = 0.0707;
  return true;
}

bool apply_deepseek2_dim(ModelConfig& c, const std::string& k, double x) {
  const int i = int(x);
  MoeConfig& m = c.moe;
  if (k == "experts") {
    m.n_experts = i;
  } else if (k == "experts_used") {
    m.n_used = i;
  } else if (k == "shared_experts") {
    m.n_shared = i;
  } else if (k == "expert_ffn") {
    m.expert_ffn = i;
  } else if (k == "dense_lead") {
    m.n_dense_lead = i;
  } else if (k == "moe_norm") {
    m.norm_weights = i != 0;
  } else if (k == "moe_scale") {
    m.weights_scale = float(x);
  } else if (k == "sigmoid") {
    m.gating = i != 0 ? MoeGating::Sigmoid : MoeGating::Softmax;
  } else if (k == "sel_bias") {
    m.selection_bias = i != 0;
  } else if (k == "groups") {
    m.n_groups = i;
  } else if (k == "groups_used") {
    m.n_groups_used = i;
  } else if (k == "yarn") {
    c.rope.freq_scale = x > 0 ? 1.0 / x : 0.0;
    c.rope.yarn.ext_factor = x == 1.0 ? 0.0 : 1.0;
    if (c.rope.yarn.orig_ctx == 0 && x > 0) c.rope.yarn.orig_ctx = std::max(1, int(c.ctx_len / x));
  } else if (k == "yarn_orig") {
    c.rope.yarn.orig_ctx = i;
  } else if (k == "yarn_log_mul") {
    c.yarn_log_mul = x;
  } else {
    return false;
  }
  return true;
}

void deepseek2_llama_cpp_notes(const ModelConfig& c, std::vector<std::string>& out) {
  if (c.attention == AttentionKind::Mla && c.moe.enabled() && c.moe.n_shared == 0)
    out.push_back(
        "deepseek2 MoE without shared experts: llama.cpp requires the ffn_*_shexp tensors");
  if (c.moe.enabled() && c.moe.n_experts > 256)
    out.push_back("more than 256 experts: llama.cpp's limit (LLAMA_MAX_EXPERTS)");
  if (c.moe.grouped() && c.moe.n_groups_used == c.moe.n_groups)
    out.push_back(
        "expert_group_used_count = expert_group_count: llama.cpp asserts fewer groups used");
}

int64_t moe_extra_parameters(const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  if (!m.enabled()) return 0;
  const int64_t d = c.dim;
  const int64_t moe = d * m.n_experts + 3 * d * m.expert_ffn * m.n_experts +
                      3 * d * m.shared_ffn() + (m.selection_bias ? m.n_experts : 0);
  return int64_t(c.n_layers - m.n_dense_lead) * (moe - 3 * d * c.ffn_dim);
}

}  // namespace kamera
