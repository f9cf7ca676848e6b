#include "synthetic/gpt_oss_shapes.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "model/gpt_oss.h"
#include "synthetic/preset_shape.h"

namespace kamera {

bool gpt_oss_preset(const std::string& preset, ModelConfig& c) {
  MoeConfig& m = c.moe;
  double yarn = 32.0;
  if (preset == "tiny") {
    set_shape(c, {64, 2, 4, 2, 32, 64, 512, 8192});
    c.rope.theta = 150000.0;
    c.layer_kinds.window = 8;
    m.n_experts = 4;
    m.n_used = 2;
    m.expert_ffn = 64;
  } else if (preset == "gpt-oss-20b" || preset == "gpt-oss-20b-2l") {  // its config.json
    set_shape(c, {2880, preset == "gpt-oss-20b" ? 24 : 2, 64, 8, 64, 2880, 201088, 131072});
    c.rope.theta = 150000.0;
    c.layer_kinds.window = 128;
    m.n_experts = 32;
    m.n_used = 4;
    m.expert_ffn = 2880;
  } else {
    return false;
  }
  c.rms_eps = 1e-5f;
  c.tied_output = false;  // the converter always writes output.weight
  c.qkv_bias = true;
  m.gating = MoeGating::SoftmaxWeight;
  m.oai_experts = true;
  m.norm_weights = false;
  c.rope.layout = RopeLayout::Neox;
  c.rope.n_rot = c.head_dim;
  c.rope.head_dim = c.head_dim;
  c.rope.freq_scale = 1.0 / yarn;
  c.rope.yarn = {1.0, int(c.ctx_len / yarn), 32.0, 1.0};
  finish_gpt_oss(c);
  return true;
}

void finish_gpt_oss(ModelConfig& c) {
  if (!is_gpt_oss(c.arch)) return;
  c.layer_kinds.kinds = gpt_oss_layer_kinds(c.n_layers, kGptOssDefaultSwaPattern);
  c.layer_kinds.local_theta = c.rope.theta;
  c.layer_kinds.local_scaled = true;
  const double factor = c.rope.yarn.ext_factor != 0.0 ? 1.0 / c.rope.freq_scale : 1.0;
  c.attn_scale = gpt_oss_attn_scale(factor, 1.0, c.head_dim);
}

void write_gpt_oss_keys(GgufWriter& w, const ModelConfig& c) {
  if (!is_gpt_oss(c.arch)) return;
  const std::string a = arch_name(c.arch);
  const auto k = [&a](const char* suffix) { return gguf_key::arch_key(a, suffix); };
  w.set_u32(k(gguf_key::kExpertCount), uint32_t(c.moe.n_experts));
  w.set_u32(k(gguf_key::kExpertUsedCount), uint32_t(c.moe.n_used));
  w.set_u32(k(gguf_key::kExpertFeedForwardLength), uint32_t(c.moe.expert_ffn));
  w.set_u32(k(gguf_key::kSlidingWindow), uint32_t(c.layer_kinds.window));
  if (c.rope.yarn.ext_factor == 0.0) return;
  w.set_string(k(gguf_key::kRopeScalingType), "yarn");
  w.set_f32(k(gguf_key::kRopeScalingFactor), float(1.0 / c.rope.freq_scale));
  w.set_u32(k(gguf_key::kRopeScalingOrigCtx), uint32_t(c.rope.yarn.orig_ctx));
}

int64_t gpt_oss_extra_parameters(const ModelConfig& c) {
  if (!is_gpt_oss(c.arch)) return 0;
  const int64_t E = c.moe.n_experts;
  const int64_t layer = c.n_heads + c.dim + E + E * (2 * int64_t(c.moe.expert_ffn) + c.dim);
  return c.n_layers * layer;
}

}  // namespace kamera
