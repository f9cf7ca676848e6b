#include "model/deepseek2.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>

#include "model/gguf.h"

namespace kamera {

namespace {

constexpr const char* kArch = "deepseek2";

std::string key(const char* k) {
  return std::string(kArch) + "." + k;
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
  const int64_t lead = f.get_int(key("leading_dense_block_count")).value_or(c.n_layers);
  if (lead < 0)
    return make_error(ErrorCode::CorruptData, "{}: leading_dense_block_count = {}", src, lead);
  if (lead >= c.n_layers) return Status::Ok();  // every FFN dense
  MoeConfig& m = c.moe;
  m.n_dense_lead = int(lead);
  KAMERA_ASSIGN_OR_RETURN(m.n_experts, need_count(f, "expert_count"));
  KAMERA_ASSIGN_OR_RETURN(m.n_used, need_count(f, "expert_used_count"));
  KAMERA_ASSIGN_OR_RETURN(m.expert_ffn, need_count(f, "expert_feed_forward_length"));
  const int64_t shared = f.get_int(key("expert_shared_count")).value_or(0);
  if (shared < 0 || shared > 1 << 10)
    return make_error(ErrorCode::CorruptData, "{}: expert_shared_count = {}", src, shared);
  m.n_shared = int(shared);
  m.norm_weights = f.get_bool(key("expert_weights_norm")).value_or(false);
  m.weights_scale = float(f.get_float(key("expert_weights_scale")).value_or(1.0));
  const int64_t gating = f.get_int(key("expert_gating_func")).value_or(0);
  if (gating == 2)
    return make_error(ErrorCode::Unsupported,
                      "{}: sigmoid expert gating (expert_gating_func = 2, DeepSeek-V3) is not "
                      "supported: kamera runs softmax gating (DeepSeek-V2)",
                      src);
  if (gating != 0 && gating != 1)
    return make_error(ErrorCode::CorruptData, "{}: expert_gating_func = {} is unknown", src,
                      gating);
  if (f.get_int(key("expert_group_count")).value_or(1) > 1)
    return make_error(ErrorCode::Unsupported,
                      "{}: group-limited expert routing (expert_group_count > 1) is not supported",
                      src);
  const auto shexp = f.get_int(key("expert_shared_feed_forward_length"));
  if (shexp && *shexp != int64_t(m.shared_ffn()))
    return make_error(ErrorCode::Unsupported,
                      "{}: expert_shared_feed_forward_length = {}, but deepseek2's shared experts "
                      "are {} x {} wide",
                      src, *shexp, m.n_shared, m.expert_ffn);
  return validate_moe(m, c.n_layers, src);
}

Status read_rope_scaling(const GgufFile& f, ModelConfig& c) {
  const std::string& src = f.name();
  c.yarn_log_mul = f.get_float(key("rope.scaling.yarn_log_multiplier")).value_or(0.0);
  const auto type = f.get_string(key("rope.scaling.type"));
  double factor = f.get_float(key("rope.scaling.factor")).value_or(0.0);
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
  const int64_t orig = f.get_int(key("rope.scaling.original_context_length")).value_or(c.ctx_len);
  if (orig <= 0 || orig > INT32_MAX)
    return make_error(ErrorCode::CorruptData, "{}: rope.scaling.original_context_length = {}", src,
                      orig);
  c.rope.yarn.orig_ctx = int(orig);
  c.yarn_attn_factor = f.get_float(key("rope.scaling.attn_factor")).value_or(1.0);
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

void write_deepseek2_keys(GgufWriter& w, const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  // llama.cpp reads these for every deepseek2 file, MoE or not
  w.set_u32(key("leading_dense_block_count"), uint32_t(m.enabled() ? m.n_dense_lead : c.n_layers));
  w.set_u32(key("expert_feed_forward_length"), uint32_t(m.enabled() ? m.expert_ffn : c.ffn_dim));
  w.set_u32(key("expert_count"), uint32_t(m.n_experts));
  w.set_u32(key("expert_shared_count"), uint32_t(m.n_shared));
  w.set_f32(key("expert_weights_scale"), m.enabled() ? m.weights_scale : 1.0f);
  w.set_f32(key("rope.scaling.yarn_log_multiplier"), float(c.yarn_log_mul));
  if (m.enabled()) {
    w.set_u32(key("expert_used_count"), uint32_t(m.n_used));
    w.set_bool(key("expert_weights_norm"), m.norm_weights);
    w.set_u32(key("expert_gating_func"), 1);  // softmax
  }
  if (c.rope.yarn.ext_factor != 0.0) {
    w.set_string(key("rope.scaling.type"), "yarn");
    w.set_f32(key("rope.scaling.factor"), float(1.0 / c.rope.freq_scale));
    w.set_u32(key("rope.scaling.original_context_length"), uint32_t(c.rope.yarn.orig_ctx));
    if (c.yarn_attn_factor != 1.0)
      w.set_f32(key("rope.scaling.attn_factor"), float(c.yarn_attn_factor));
  }
}

float mla_kq_scale(const ModelConfig& c) {
  // f32 as llama.cpp evaluates it; exactly 1 / sqrt(head_dim) without scaling
  const float mscale = float(c.yarn_attn_factor) *
                       (1.0f + float(c.yarn_log_mul) * std::log(1.0f / float(c.rope.freq_scale)));
  return 1.0f * mscale * mscale / std::sqrt(float(c.head_dim));
}

bool deepseek2_preset(const std::string& preset, ModelConfig& c) {
  if (preset == "tiny-moe") {  // on top of the tiny MLA shape
    c.n_layers = 3;
    c.moe = {8, 2, 1, 32, 1, false, 1.0f};  // experts, used, shared, expert FFN, dense lead
    c.rope.freq_scale = 1.0 / 4;
    c.rope.yarn = {1.0, 256, 32.0, 1.0};
    c.yarn_log_mul = 0.0707;  // 0.1 * mscale_all_dim, as V2-Lite
    return true;
  }
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
  if (c.moe.enabled() && c.moe.n_shared == 0)
    out.push_back(
        "deepseek2 MoE without shared experts: llama.cpp requires the ffn_*_shexp tensors");
  if (c.moe.enabled() && c.moe.n_experts > 256)
    out.push_back("more than 256 experts: llama.cpp's limit (LLAMA_MAX_EXPERTS)");
}

int64_t moe_extra_parameters(const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  if (!m.enabled()) return 0;
  const int64_t d = c.dim;
  const int64_t moe = d * m.n_experts + 3 * d * m.expert_ffn * m.n_experts + 3 * d * m.shared_ffn();
  return int64_t(c.n_layers - m.n_dense_lead) * (moe - 3 * d * c.ffn_dim);
}

void fingerprint_deepseek2(XXH3_state_s* st, const Model& m) {
  const ModelConfig& c = m.cfg;
  if (!c.moe.enabled() && c.rope.yarn.ext_factor == 0.0) return;
  const MoeConfig& e = c.moe;
  const int ints[] = {e.n_experts,         e.n_used,       e.n_shared,
                      e.expert_ffn,        e.n_dense_lead, int(e.norm_weights),
                      c.rope.yarn.orig_ctx};
  const double reals[] = {e.weights_scale,       c.rope.yarn.ext_factor, c.rope.yarn.beta_fast,
                          c.rope.yarn.beta_slow, c.yarn_log_mul,         c.yarn_attn_factor};
  XXH3_128bits_update(st, ints, sizeof(ints));
  XXH3_128bits_update(st, reals, sizeof(reals));
  // as model.cpp's weights: an F32 matrix hashes as the f32 values it was once held as, another
  // type adds its type id and hashes its raw bytes
  for (const LayerWeights& l : m.layers)
    for (const Weight* w : {&l.moe.router, &l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps,
                            &l.moe.gate_shexp, &l.moe.up_shexp, &l.moe.down_shexp}) {
      const uint64_t n = uint64_t(w->rows() * w->cols());
      XXH3_128bits_update(st, &n, sizeof(n));
      if (!w->is_f32()) {
        const uint32_t type = uint32_t(w->type());
        XXH3_128bits_update(st, &type, sizeof(type));
      }
      if (w->bytes() > 0) XXH3_128bits_update(st, w->raw(), w->bytes());
    }
}

}  // namespace kamera
