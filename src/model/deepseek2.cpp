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

// expert_gating_func: 0 or absent (llama.cpp's default for V2 files) and 1 softmax, 2 sigmoid.
Status read_gating(const GgufFile& f, MoeConfig& m) {
  const int64_t gating = f.get_int(key(gk::kExpertGatingFunc)).value_or(0);
  if (gating == 0 || gating == 1) {
    m.gating = MoeGating::Softmax;
  } else if (gating == 2) {
    m.gating = MoeGating::Sigmoid;
  } else if (gating == 3 || gating == 4) {
    return make_error(ErrorCode::Unsupported,
                      "{}: expert_gating_func = {} ({}) is not supported (1 softmax, 2 sigmoid)",
                      f.name(), gating, gating == 3 ? "softmax of the chosen" : "sqrt-softplus");
  } else {
    return make_error(ErrorCode::CorruptData, "{}: expert_gating_func = {} is unknown", f.name(),
                      gating);
  }
  return Status::Ok();
}

// expert_group_count (0 or absent: 1) and expert_group_used_count; validate_moe checks them.
Status read_groups(const GgufFile& f, MoeConfig& m) {
  const int64_t groups = f.get_int(key(gk::kExpertGroupCount)).value_or(1);
  const int64_t used = f.get_int(key(gk::kExpertGroupUsedCount)).value_or(groups);
  if (groups < 0 || groups > 1 << 16 || used < 0 || used > 1 << 16)
    return make_error(ErrorCode::CorruptData,
                      "{}: expert_group_count = {}, expert_group_used_count = {}", f.name(), groups,
                      used);
  m.n_groups = groups <= 1 ? 1 : int(groups);
  m.n_groups_used = groups <= 1 ? 1 : int(used);
  return Status::Ok();
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
  if (m.weights_scale == 0.0f) m.weights_scale = 1.0f;  // llama.cpp: 0 is "not scaled"
  KAMERA_TRY(read_gating(f, m));
  KAMERA_TRY(read_groups(f, m));
  m.selection_bias = f.find_tensor(fmt::format("blk.{}.exp_probs_b.bias", lead)) != nullptr;
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

Status read_mla_layout(const GgufFile& f, ModelConfig& c) {
  const std::string& src = f.name();
  const auto k_mla = f.get_int(key(gk::kKeyLengthMla));
  const auto v_mla = f.get_int(key(gk::kValueLengthMla));
  const int64_t v_len = f.get_int(key(gk::kValueLength)).value_or(0);
  if (!k_mla && !v_mla) {  // KvB: the per-head widths in key_length / value_length
    c.mla.file_layout = MlaFileLayout::KvB;
    c.mla.v_head_dim = int(v_len);
    return Status::Ok();
  }
  if (!k_mla || !v_mla)
    return make_error(ErrorCode::CorruptData, "{}: {} without {}", src,
                      key(k_mla ? gk::kKeyLengthMla : gk::kValueLengthMla),
                      key(k_mla ? gk::kValueLengthMla : gk::kKeyLengthMla));
  const int64_t lat = c.mla.kv_lora_rank;
  auto bad = [&](const char* k, int64_t got, int64_t want) {
    return make_error(ErrorCode::Unsupported,
                      "{}: {} = {} with {}: llama.cpp's MLA layout has {} (one latent KV head)",
                      src, key(k), got, key(gk::kKeyLengthMla), want);
  };
  if (c.n_kv_heads != 1) return bad(gk::kHeadCountKv, c.n_kv_heads, 1);
  if (c.head_dim != lat + c.rope.n_rot) return bad(gk::kKeyLength, c.head_dim, lat + c.rope.n_rot);
  if (v_len != lat) return bad(gk::kValueLength, v_len, lat);
  if (*k_mla <= 0 || *k_mla > 1 << 16 || *v_mla <= 0 || *v_mla > 1 << 16)
    return make_error(ErrorCode::CorruptData, "{}: {} = {}, {} = {}", src, key(gk::kKeyLengthMla),
                      *k_mla, key(gk::kValueLengthMla), *v_mla);
  c.mla.file_layout = MlaFileLayout::Split;
  c.head_dim = int(*k_mla);
  c.mla.v_head_dim = int(*v_mla);
  c.n_kv_heads = c.n_heads;
  return Status::Ok();
}

std::vector<float> join_mla_kv_b(const MlaConfig& m, int n_heads, const std::vector<float>& k_b,
                                 const std::vector<float>& v_b) {
  const size_t L = size_t(m.kv_lora_rank), nope = size_t(m.qk_nope_dim), v = size_t(m.v_head_dim);
  std::vector<float> kv(size_t(n_heads) * (nope + v) * L);
  for (size_t h = 0; h < size_t(n_heads); ++h) {
    float* rows = kv.data() + h * (nope + v) * L;
    const float* kh = k_b.data() + h * L * nope;  // L rows of nope: W_kb transposed
    for (size_t i = 0; i < nope; ++i)
      for (size_t l = 0; l < L; ++l) rows[i * L + l] = kh[l * nope + i];
    std::copy_n(v_b.data() + h * v * L, v * L, rows + nope * L);
  }
  return kv;
}

void split_mla_kv_b(const MlaConfig& m, int n_heads, const float* kv_b, float* k_b, float* v_b) {
  const size_t L = size_t(m.kv_lora_rank), nope = size_t(m.qk_nope_dim), v = size_t(m.v_head_dim);
  for (size_t h = 0; h < size_t(n_heads); ++h) {
    const float* rows = kv_b + h * (nope + v) * L;
    if (k_b)
      for (size_t i = 0; i < nope; ++i)
        for (size_t l = 0; l < L; ++l) k_b[h * L * nope + l * nope + i] = rows[i * L + l];
    if (v_b) std::copy_n(rows + nope * L, v * L, v_b + h * v * L);
  }
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
  if (m.selection_bias) t.push_back({p + "exp_probs_b.bias", {E}, true});
  return t;
}

Status read_moe_layer(const GgufFile&, const ModelConfig& c, int layer, const TensorReader& read,
                      MoeWeights& w) {
  Weight* dst[] = {&w.router,     &w.gate_exps,  &w.down_exps, &w.up_exps,
                   &w.gate_shexp, &w.down_shexp, &w.up_shexp};
  size_t i = 0;
  for (const MoeTensorSpec& t : moe_layer_tensors(c, layer))
    if (t.ne.size() > 1) KAMERA_TRY(read(t.name, t.ne, *dst[i++]));  // the bias: the caller's
  return Status::Ok();
}

float mla_kq_scale(const ModelConfig& c) {
  // f32 as llama.cpp evaluates it; exactly 1 / sqrt(head_dim) without scaling
  const float mscale = float(c.yarn_attn_factor) *
                       (1.0f + float(c.yarn_log_mul) * std::log(1.0f / float(c.rope.freq_scale)));
  return 1.0f * mscale * mscale / std::sqrt(float(c.head_dim));
}

}  // namespace kamera
