#include "model/config.h"

#include <fmt/format.h>

#include <utility>

#include "model/gpt_oss.h"
#include "model/layer_kinds.h"

namespace kamera {

namespace {
constexpr std::pair<Arch, const char*> kArchNames[] = {
    {Arch::Llama, "llama"},     {Arch::Qwen2, "qwen2"},
    {Arch::Qwen2Vl, "qwen2vl"}, {Arch::Deepseek2, "deepseek2"},
    {Arch::Qwen3, "qwen3"},     {Arch::Qwen3Moe, "qwen3moe"},
    {Arch::Qwen3Vl, "qwen3vl"}, {Arch::Qwen3VlMoe, "qwen3vlmoe"},
    {Arch::Smollm3, "smollm3"}, {Arch::Gemma3, "gemma3"},
    {Arch::Phi3, "phi3"},       {Arch::GptOss, "gpt-oss"},
};
}  // namespace

const char* arch_name(Arch a) {
  for (const auto& [arch, name] : kArchNames)
    if (arch == a) return name;
  return "unknown";
}

std::optional<Arch> arch_from_name(std::string_view name) {
  for (const auto& [arch, n] : kArchNames)
    if (name == n) return arch;
  return std::nullopt;
}

std::string arch_names() {
  std::string s;
  for (const auto& [arch, name] : kArchNames) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

Status ModelConfig::validate(const std::string& src) const {
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "{}: invalid model config: {}", src, what);
  };
  constexpr int kMax = 1 << 20;
  if (n_vocab <= 0 || n_vocab > 4 * kMax) return bad(fmt::format("vocab size {}", n_vocab));
  if (dim <= 0 || dim > kMax) return bad(fmt::format("dim {}", dim));
  if (n_layers <= 0 || n_layers > 4096) return bad(fmt::format("{} layers", n_layers));
  if (n_heads <= 0 || n_heads > 4096) return bad(fmt::format("{} heads", n_heads));
  if (n_kv_heads <= 0 || n_kv_heads > n_heads || n_heads % n_kv_heads != 0)
    return bad(fmt::format("{} kv heads for {} heads (must divide)", n_kv_heads, n_heads));
  if (head_dim <= 0 || head_dim > 4096) return bad(fmt::format("head dim {}", head_dim));
  if (ffn_dim <= 0 || ffn_dim > 4 * kMax) return bad(fmt::format("ffn dim {}", ffn_dim));
  if (ctx_len <= 0) return bad(fmt::format("context length {}", ctx_len));
  if (rope.n_rot <= 0 || rope.n_rot > head_dim || rope.n_rot % 2 != 0)
    return bad(fmt::format("rope dims {} for head dim {}", rope.n_rot, head_dim));
  if (!(rope.theta > 0) || !(rope.freq_scale > 0)) return bad("rope theta / scale must be > 0");
  if (!(rms_eps > 0) || !(rms_eps < 1)) return bad(fmt::format("rms eps {}", rms_eps));
  if (attention == AttentionKind::Mla) {
    const MlaConfig& m = mla;
    if (m.kv_lora_rank <= 0 || m.qk_nope_dim < 0 || m.qk_rope_dim <= 0 || m.v_head_dim <= 0 ||
        m.q_lora_rank < 0 || m.kv_lora_rank > kMax || m.qk_rope_dim % 2 != 0)
      return bad(fmt::format("MLA dims q_lora {} kv_lora {} nope {} rope {} v {}", m.q_lora_rank,
                             m.kv_lora_rank, m.qk_nope_dim, m.qk_rope_dim, m.v_head_dim));
    if (head_dim != m.qk_nope_dim + m.qk_rope_dim || rope.n_rot != m.qk_rope_dim ||
        rope.head_dim != m.qk_rope_dim)
      return bad("MLA head dim must be qk_nope + qk_rope, and the rope acts on the qk_rope dims");
    if (n_kv_heads != n_heads) return bad("MLA has one KV head per query head");
  }
  for (const auto* v : {&longrope.short_factors, &longrope.long_factors})
    if (!v->empty() && int(v->size()) != rope.n_pairs())
      return bad(fmt::format("{} LongRoPE factors for {} rope pairs", v->size(), rope.n_pairs()));
  if (longrope.enabled() && longrope.orig_ctx <= 0)
    return bad("LongRoPE needs an original context length");
  if (!(rope.attn_factor > 0)) return bad("rope attn_factor must be > 0");
  if (rope.yarn.ext_factor != 0 &&
      (rope.yarn.orig_ctx <= 0 || !(rope.yarn.beta_fast > 0) || !(rope.yarn.beta_slow > 0)))
    return bad("YaRN needs an original context and beta_fast, beta_slow > 0");
  if (moe.enabled() && attention != AttentionKind::Mla && !is_qwen3_moe(arch) && !is_gpt_oss(arch))
    return bad(
        "mixture-of-experts layers are deepseek2's (MLA), qwen3moe's, qwen3vlmoe's and gpt-oss's");
  if ((is_qwen3_moe(arch) || is_gpt_oss(arch)) && !moe.enabled())
    return bad(fmt::format("{} without experts", arch_name(arch)));
  if (n_deepstack < 0 || n_deepstack > n_layers || (n_deepstack > 0 && !is_qwen3vl(arch)))
    return bad(fmt::format("{} deepstack layers for {} layers ({}; only qwen3vl has them)",
                           n_deepstack, n_layers, arch_name(arch)));
  if (qk_norm && attention == AttentionKind::Mla) return bad("q/k norms are qwen3's (GQA)");
  KAMERA_TRY(validate_moe(moe, n_layers, src));
  KAMERA_TRY(validate_layer_kinds(*this, src));
  if (is_qwen3vl(arch) && rope.mrope != MropeMode::Interleaved)
    return bad("qwen3vl rotates with interleaved M-RoPE sections");
  if (rope.mrope != MropeMode::None) {
    int total = 0;
    for (int s : rope.sections) {
      if (s < 0) return bad("negative rope section");
      total += s;
    }
    if (total != rope.n_pairs())
      return bad(
          fmt::format("rope sections sum to {} pairs, the rope has {}", total, rope.n_pairs()));
  }
  return Status::Ok();
}

std::vector<std::string> model_features(const ModelConfig& c) {
  std::vector<std::string> f;
  f.push_back(c.attention == AttentionKind::Mla
                  ? fmt::format("mla (kv_lora {}, rope {})", c.mla.kv_lora_rank, c.mla.qk_rope_dim)
                  : fmt::format("gqa ({} heads, {} kv heads, head {})", c.n_heads, c.n_kv_heads,
                                c.head_dim));
  if (c.attention == AttentionKind::Mla)  // how the file held it (model/deepseek2.h)
    f.push_back(c.mla.file_layout == MlaFileLayout::Split
                    ? "mla_layout split (llama.cpp's current converter: one latent KV head, "
                      "attn_k_b / attn_v_b)"
                    : "mla_layout kv_b (before llama.cpp's MLA rework: attn_kv_b)");
  if (c.qkv_bias) f.push_back("qkv_bias");
  if (c.qk_norm) f.push_back("qk_norm (per-head RMSNorm of q and k before the rope)");
  if (c.moe.enabled())
    f.push_back(fmt::format("moe ({} experts, {} used, {} shared, width {}, {} dense lead{})",
                            c.moe.n_experts, c.moe.n_used, c.moe.n_shared, c.moe.expert_ffn,
                            c.moe.n_dense_lead, c.moe.norm_weights ? ", top-k normalized" : ""));
  if (c.moe.v3_routing())  // DeepSeek-V3 / Kimi-VL routing (model/moe.h)
    f.push_back(fmt::format("v3_routing ({} scores{}, {} of {} groups, weights x {})",
                            c.moe.gating == MoeGating::Sigmoid ? "sigmoid" : "softmax",
                            c.moe.selection_bias ? ", selection bias exp_probs_b" : "",
                            c.moe.n_groups_used, c.moe.n_groups, c.moe.weights_scale));
  if (c.rope.mrope != MropeMode::None)
    f.push_back(c.rope.mrope == MropeMode::Interleaved ? "mrope (interleaved)" : "mrope (blocked)");
  if (c.n_deepstack > 0)
    f.push_back(fmt::format("deepstack ({} layers: image rows carry {} x {} values)", c.n_deepstack,
                            1 + c.n_deepstack, c.dim));
  if (c.rope.yarn.ext_factor != 0) f.push_back("yarn");
  if (c.rope.n_rot < c.head_dim && c.attention == AttentionKind::Gqa)
    f.push_back(
        fmt::format("partial_rotary ({} of {} head dims rotated)", c.rope.n_rot, c.head_dim));
  if (c.longrope.enabled()) {  // which set select_rope_context chose (ops/rope.h, LongRope)
    const char* set = c.rope.freq_factors.empty()                       ? "no"
                      : c.rope.freq_factors == c.longrope.short_factors ? "short"
                                                                        : "long";
    f.push_back(
        fmt::format("longrope ({} factors in use; long above the original context {}; "
                    "attn_factor {:.4f})",
                    set, c.longrope.orig_ctx, c.rope.attn_factor));
  }
  if (c.tied_output) f.push_back("tied_output");
  add_layer_kind_features(c, f);
  add_gpt_oss_features(c, f);
  return f;
}

void select_rope_context(ModelConfig& c, int64_t n_ctx) {
  if (!c.longrope.enabled()) return;
  c.rope.freq_factors = c.longrope.for_context(n_ctx > 0 ? n_ctx : c.ctx_len);
}

}  // namespace kamera
