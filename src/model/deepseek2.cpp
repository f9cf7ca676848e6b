#include "model/deepseek2.h"

#include <algorithm>
#include <cmath>

#include "gguf/gguf.h"
#include "gguf/keys.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

std::string key(const char* suffix) {
  return gk::arch_key(arch_name(Arch::Deepseek2), suffix);
}

// A positive integer key, or the error naming it.
Result<int> need_count(const GgufFile& f, const char* k) {
  const auto v = f.get_int(key(k));
  if (!v)
    return make_error(ErrorCode::CorruptData, "{}: missing metadata key '{}'", f.name(), key(k));
  if (*v <= 0 || *v > INT32_MAX)
    return make_error(ErrorCode::CorruptData, "{}: {} = {} is out of range", f.name(), key(k), *v);
  return int(*v);
}

Status read_moe_hparams(const GgufFile& f, ModelConfig& c) {
  const std::string& src = f.name();
  const int64_t lead = f.get_int(key(gk::kLeadingDenseBlockCount)).value_or(c.n_layers);
  if (lead < 0)
    return make_error(ErrorCode::CorruptData, "{}: leading_dense_block_count = {}", src, lead);
  if (lead >= c.n_layers) return Status::Ok();  // every FFN dense
  MoeConfig& m = c.moe;
  m.n_dense_lead = int(lead);
  KAMERA_ASSIGN_OR_RETURN(m.n_experts, need_count(f, gk::kExpertCount));
  KAMERA_ASSIGN_OR_RETURN(m.n_used, need_count(f, gk::kExpertUsedCount));
  KAMERA_ASSIGN_OR_RETURN(m.expert_ffn, need_count(f, gk::kExpertFeedForwardLength));
  const int64_t shared = f.get_int(key(gk::kExpertSharedCount)).value_or(0);
  if (shared < 0 || shared > 1 << 10)
    return make_error(ErrorCode::CorruptData, "{}: expert_shared_count = {}", src, shared);
  m.n_shared = int(shared);
  m.norm_weights = f.get_bool(key(gk::kExpertWeightsNorm)).value_or(false);
  m.weights_scale = float(f.get_float(key(gk::kExpertWeightsScale)).value_or(1.0));
  const int64_t gating = f.get_int(key(gk::kExpertGatingFunc)).value_or(0);
  if (gating == 2)
    return make_error(ErrorCode::Unsupported,
                      "{}: sigmoid expert gating (expert_gating_func = 2, DeepSeek-V3) is not "
                      "supported: kamera runs softmax gating (DeepSeek-V2)",
                      src);
  if (gating != 0 && gating != 1)
    return make_error(ErrorCode::CorruptData, "{}: expert_gating_func = {} is unknown", src,
                      gating);
  if (f.get_int(key(gk::kExpertGroupCount)).value_or(1) > 1)
    return make_error(ErrorCode::Unsupported,
                      "{}: group-limited expert routing (expert_group_count > 1) is not supported",
                      src);
  const auto shexp = f.get_int(key(gk::kExpertSharedFeedForwardLength));
  if (shexp && *shexp != int64_t(m.shared_ffn()))
    return make_error(ErrorCode::Unsupported,
                      "{}: expert_shared_feed_forward_length = {}, but deepseek2's shared experts "
                      "are {} x {} wide",
                      src, *shexp, m.n_shared, m.expert_ffn);
  return validate_moe(m, c.n_layers, src);
}

Status read_rope_scaling(const GgufFile& f, ModelConfig& c) {
  const std::string& src = f.name();
  c.yarn_log_mul = f.get_float(key(gk::kRopeScalingYarnLogMul)).value_or(0.0);
  const auto type = f.get_string(key(gk::kRopeScalingType));
  double factor = f.get_float(key(gk::kRopeScalingFactor)).value_or(0.0);
  if (factor == 0.0) factor = 1.0;  // llama.cpp: 0 or absent is no scaling
  if (!type || *type == "none") return Status::Ok();
  if (!(factor > 0) || !std::isfinite(factor))
    return make_error(ErrorCode::CorruptData, "{}: rope.scaling.factor {} must be > 0", src,
                      factor);
  if (*type == "linear") {
    if (factor == 1.0) return Status::Ok();
    return make_error(ErrorCode::Unsupported,
                      "{}: linear rope scaling on deepseek2 is not supported (llama.cpp scales "
                      "only the rope band's magnitude there); yarn is",
                      src);
  }
  if (*type != "yarn")
    return make_error(ErrorCode::Unsupported,
                      "{}: rope scaling '{}' is not supported for deepseek2 (none, yarn)", src,
                      *type);
  c.rope.freq_scale = 1.0 / factor;
  c.rope.yarn.ext_factor = 1.0;
  const int64_t orig = f.get_int(key(gk::kRopeScalingOrigCtx)).value_or(c.ctx_len);
  if (orig <= 0 || orig > INT32_MAX)
    return make_error(ErrorCode::CorruptData, "{}: rope.scaling.original_context_length = {}", src,
                      orig);
  c.rope.yarn.orig_ctx = int(orig);
  c.yarn_attn_factor = f.get_float(key(gk::kRopeScalingAttnFactor)).value_or(1.0);
  if (!(c.yarn_attn_factor > 0))
    return make_error(ErrorCode::CorruptData, "{}: rope.scaling.attn_factor {} must be > 0", src,
                      c.yarn_attn_factor);
  return Status::Ok();
}

}  // namespace

Status read_deepseek2_hparams(const GgufFile& f, ModelConfig& c) {
  KAMERA_TRY(read_moe_hparams(f, c));
  return read_rope_scaling(f, c);
}

std::vector<MoeTensorSpec> moe_layer_tensors(const ModelConfig& c, int layer) {
  const std::string p = fmt::format("blk.{}.", layer);
  const MoeConfig& m = c.moe;
  const int64_t d = c.dim, F = m.expert_ffn, E = m.n_experts, S = m.shared_ffn();
  std::vector<MoeTensorSpec> t = {
      {p + "ffn_gate_inp.weight", {d, E}, true},
      {p + "ffn_gate_exps.weight", {d, F, E}, false},
      {p + "ffn_down_exps.weight", {F, d, E}, false},
      {p + "ffn_up_exps.weight", {d, F, E}, false},
  };
  if (S > 0) {
    t.push_back({p + "ffn_gate_shexp.weight", {d, S}, false});
    t.push_back({p + "ffn_down_shexp.weight", {S, d}, false});
    t.push_back({p + "ffn_up_shexp.weight", {d, S}, false});
  }
  return t;
}

Status read_moe_layer(const GgufFile& f, const ModelConfig& c, int layer, const TensorReader& read,
                      MoeWeights& w) {
  const std::string bias = fmt::format("blk.{}.exp_probs_b.bias", layer);
  if (f.find_tensor(bias))
    return make_error(ErrorCode::Unsupported,
                      "{}: tensor '{}' (the expert-selection bias of DeepSeek-V3) is not supported",
                      f.name(), bias);
  Weight* dst[] = {&w.router,     &w.gate_exps,  &w.down_exps, &w.up_exps,
                   &w.gate_shexp, &w.down_shexp, &w.up_shexp};
  const auto specs = moe_layer_tensors(c, layer);
  for (size_t i = 0; i < specs.size(); ++i) KAMERA_TRY(read(specs[i].name, specs[i].ne, *dst[i]));
  return Status::Ok();
}

float mla_kq_scale(const ModelConfig& c) {
  // f32 as llama.cpp evaluates it; exactly 1 / sqrt(head_dim) without scaling
  const float mscale = float(c.yarn_attn_factor) *
                       (1.0f + float(c.yarn_log_mul) * std::log(1.0f / float(c.rope.freq_scale)));
  return 1.0f * mscale * mscale / std::sqrt(float(c.head_dim));
}

}  // namespace kamera
