#include "model/gpt_oss.h"

#include <fmt/format.h>

#include <cmath>

#include "gguf/gguf.h"
#include "gguf/keys.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

struct Keys {
  const GgufFile& f;
  std::string arch;
  std::string key(const char* s) const { return gk::arch_key(arch, s); }
  Result<int> count(const char* k) const {
    const auto v = f.get_int(key(k));
    if (!v)
      return make_error(ErrorCode::CorruptData, "{}: missing metadata key '{}'", f.name(), key(k));
    if (*v <= 0 || *v > INT32_MAX)
      return make_error(ErrorCode::CorruptData, "{}: {} = {} is out of range", f.name(), key(k),
                        *v);
    return int(*v);
  }
};

Status read_experts(const Keys& k, ModelConfig& c) {
  MoeConfig& m = c.moe;
  KAMERA_ASSIGN_OR_RETURN(m.n_experts, k.count(gk::kExpertCount));
  KAMERA_ASSIGN_OR_RETURN(m.n_used, k.count(gk::kExpertUsedCount));
  KAMERA_ASSIGN_OR_RETURN(m.expert_ffn, k.count(gk::kExpertFeedForwardLength));
  m.gating = MoeGating::SoftmaxWeight;
  m.oai_experts = true;
  m.norm_weights = false;
  const double scale = k.f.get_float(k.key(gk::kExpertWeightsScale)).value_or(1.0);
  if (scale != 1.0 && scale != 0.0)
    return make_error(ErrorCode::Unsupported,
                      "{}: {} = {} is not supported: llama.cpp's gpt-oss does not scale the "
                      "experts' weights",
                      k.f.name(), k.key(gk::kExpertWeightsScale), scale);
  if (k.f.get_int(k.key(gk::kExpertSharedCount)).value_or(0) != 0)
    return make_error(ErrorCode::Unsupported, "{}: {} > 0: gpt-oss has no shared experts",
                      k.f.name(), k.key(gk::kExpertSharedCount));
  return validate_moe(m, c.n_layers, k.f.name());
}

Status read_window(const Keys& k, ModelConfig& c) {
  KAMERA_ASSIGN_OR_RETURN(const int window, k.count(gk::kSlidingWindow));
  if (k.f.get_int_array(k.key(gk::kSlidingWindowPattern)))
    return make_error(ErrorCode::Unsupported, "{}: {} as an array is not supported", k.f.name(),
                      k.key(gk::kSlidingWindowPattern));
  const int64_t pattern =
      k.f.get_int(k.key(gk::kSlidingWindowPattern)).value_or(kGptOssDefaultSwaPattern);
  if (pattern < 0 || pattern > c.n_layers + 1)
    return make_error(ErrorCode::CorruptData, "{}: {} = {} is out of range", k.f.name(),
                      k.key(gk::kSlidingWindowPattern), pattern);
  c.layer_kinds.window = window;
  c.layer_kinds.kinds = gpt_oss_layer_kinds(c.n_layers, int(pattern));
  c.layer_kinds.local_theta = k.f.get_float(k.key(gk::kRopeFreqBaseSwa)).value_or(c.rope.theta);
  c.layer_kinds.local_scaled = true;
  return Status::Ok();
}

// YaRN as llama.cpp applies it to gpt-oss (see the header): frequencies through the ramp, the
// magnitude into the score scale.
Status read_yarn(const Keys& k, ModelConfig& c) {
  const std::string& src = k.f.name();
  const auto type = k.f.get_string(k.key(gk::kRopeScalingType));
  double factor = k.f.get_float(k.key(gk::kRopeScalingFactor)).value_or(0.0);
  if (factor == 0.0) factor = 1.0;  // llama.cpp: 0 or absent is no scaling
  const double attn_factor = k.f.get_float(k.key(gk::kRopeScalingAttnFactor)).value_or(1.0);
  if (!(attn_factor > 0))
    return make_error(ErrorCode::CorruptData, "{}: rope.scaling.attn_factor {} must be > 0", src,
                      attn_factor);
  if (!type || *type == "none" || factor == 1.0) {
    c.attn_scale = gpt_oss_attn_scale(1.0, attn_factor, c.head_dim);
    return Status::Ok();
  }
  if (*type != "yarn")
    return make_error(ErrorCode::Unsupported,
                      "{}: rope scaling '{}' is not supported for gpt-oss (none, yarn)", src,
                      *type);
  if (!(factor > 0) || !std::isfinite(factor))
    return make_error(ErrorCode::CorruptData, "{}: rope.scaling.factor {} must be > 0", src,
                      factor);
  c.rope.freq_scale = 1.0 / factor;
  c.rope.yarn.ext_factor = 1.0;
  const int64_t orig = k.f.get_int(k.key(gk::kRopeScalingOrigCtx)).value_or(c.ctx_len);
  if (orig <= 0 || orig > INT32_MAX)
    return make_error(ErrorCode::CorruptData, "{}: rope.scaling.original_context_length = {}", src,
                      orig);
  c.rope.yarn.orig_ctx = int(orig);
  c.rope.yarn.beta_fast = k.f.get_float(k.key(gk::kRopeScalingYarnBetaFast)).value_or(32.0);
  c.rope.yarn.beta_slow = k.f.get_float(k.key(gk::kRopeScalingYarnBetaSlow)).value_or(1.0);
  c.attn_scale = gpt_oss_attn_scale(factor, attn_factor, c.head_dim);
  return Status::Ok();
}

}  // namespace

std::vector<LayerKind> gpt_oss_layer_kinds(int n_layers, int pattern) {
  std::vector<LayerKind> k(size_t(std::max(0, n_layers)), LayerKind::Global);
  for (int i = 0; i < n_layers; ++i)
    if (pattern == 0 || i % pattern < pattern - 1) k[size_t(i)] = LayerKind::Local;
  return k;
}

float gpt_oss_attn_scale(double factor, double attn_factor, int head_dim) {
  // f32 as llama.cpp evaluates it (llama-context.cpp's yarn_attn_factor, ggml's rope_yarn)
  float mscale = float(attn_factor);
  if (factor > 1.0) mscale *= 1.0f + 0.1f * std::log(float(factor));
  return mscale * mscale / std::sqrt(float(head_dim));
}

Status read_gpt_oss_hparams(const GgufFile& f, ModelConfig& c) {
  const Keys k{f, arch_name(c.arch)};
  KAMERA_TRY(read_experts(k, c));
  KAMERA_TRY(read_window(k, c));
  return read_yarn(k, c);
}

std::vector<GptOssVector> gpt_oss_layer_vectors(const ModelConfig& c, LayerWeights& l) {
  const int64_t d = c.dim, q = c.q_width(), kv = c.kv_width(), E = c.moe.n_experts,
                F = c.moe.expert_ffn;
  return {
      {"attn_q.bias", {q}, &l.bq},
      {"attn_k.bias", {kv}, &l.bk},
      {"attn_v.bias", {kv}, &l.bv},
      {"attn_output.bias", {d}, &l.bo},
      {"attn_sinks.weight", {c.n_heads}, &l.attn_sinks},
      {"post_attention_norm.weight", {d}, &l.ffn_norm},
      {"ffn_gate_inp.bias", {E}, &l.moe.router_b},
      {"ffn_gate_exps.bias", {F, E}, &l.moe.gate_b},
      {"ffn_up_exps.bias", {F, E}, &l.moe.up_b},
      {"ffn_down_exps.bias", {d, E}, &l.moe.down_b},
  };
}

void add_gpt_oss_features(const ModelConfig& c, std::vector<std::string>& out) {
  if (!is_gpt_oss(c.arch)) return;
  out.push_back(
      fmt::format("attention_sinks (one learned logit per head in every softmax's denominator; "
                  "position-free)"));
  out.push_back(fmt::format(
      "swa_alternation (sliding window {} on local layers, full attention on global ones; both "
      "with the model's rope{})",
      c.layer_kinds.window, c.rope.yarn.ext_factor != 0 ? " and YaRN" : ""));
  out.push_back(fmt::format(
      "oai_experts (router and expert biases, top {} of {} then softmax over the chosen, "
      "clamped SwiGLU: limit {}, alpha {}, (up + 1))",
      c.moe.n_used, c.moe.n_experts, kOaiSwigluLimit, kOaiSwigluAlpha));
  out.push_back(fmt::format("attn_out_bias, query scale {:.6g}", c.attn_scale));
}

}  // namespace kamera
