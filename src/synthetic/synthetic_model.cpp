#include "synthetic/synthetic_model.h"

#include <xxhash.h>

#include <charconv>
#include <cmath>
#include <sstream>

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "model/deepseek2.h"
#include "model/gpt_oss.h"
#include "model/layer_kinds.h"
#include "synthetic/corpus.h"
#include "synthetic/deepseek2_shapes.h"
#include "synthetic/gpt_oss_shapes.h"
#include "synthetic/layer_kind_shapes.h"
#include "synthetic/phi3_shapes.h"
#include "synthetic/qwen3_shapes.h"
#include "synthetic/reranker.h"
#include "synthetic/vocab.h"
#include "tokenizer/gguf_import.h"
#include "tokenizer/tokenizer.h"

namespace kamera {

namespace {

// splitmix64: a tiny deterministic generator, the same on every platform.
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return float(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
};

// Fills n values uniformly in [-a, a), a = sqrt(3) * stddev, seeded by (seed, tensor name).
void fill_uniform(float* dst, int64_t n, uint64_t seed, const std::string& name, float stddev) {
  SplitMix rng{seed ^ XXH3_64bits(name.data(), name.size())};
  const float a = std::sqrt(3.0f) * stddev;
  for (int64_t i = 0; i < n; ++i) dst[i] = (2.0f * rng.uniform() - 1.0f) * a;
}

void fill_norm(float* dst, int64_t n, uint64_t seed, const std::string& name) {
  SplitMix rng{seed ^ XXH3_64bits(name.data(), name.size())};
  for (int64_t i = 0; i < n; ++i) dst[i] = 1.0f + 0.1f * (2.0f * rng.uniform() - 1.0f);
}

}  // namespace

std::vector<std::string> synthetic_preset_names(Arch arch) {
  switch (arch) {
    case Arch::Llama:
      return {"tiny", "0.5b"};
    case Arch::Qwen2:
      return {"tiny", "0.5b", "3b", "7b"};
    case Arch::Qwen2Vl:
      return {"tiny", "2b", "3b"};
    case Arch::Deepseek2:
      return {"tiny", "tiny-moe", "lite", "lite-attn", "kimi-vl-tiny", "kimi-vl-a3b"};
    case Arch::Qwen3:
      return {"tiny", "0.6b"};
    case Arch::Qwen3Moe:
      return {"tiny", "30b-a3b-2l"};
    case Arch::Qwen3VlMoe:
      return {"tiny", "30b-a3b-3l"};
    case Arch::Qwen3Vl:
      return {"tiny", "2b"};
    case Arch::Smollm3:
      return {"tiny", "3b"};
    case Arch::Gemma3:
      return {"tiny", "1b"};
    case Arch::Phi3:
      return {"tiny", "phi4-mini"};
    case Arch::GptOss:
      return {"tiny", "gpt-oss-20b", "gpt-oss-20b-2l"};
  }
  return {"tiny"};
}

namespace {

// Keeps the rope description consistent with the attention shape.
void finish_rope(ModelConfig& c) {
  if (c.attention == AttentionKind::Mla) {
    c.head_dim = c.mla.qk_nope_dim + c.mla.qk_rope_dim;
    c.rope.n_rot = c.mla.qk_rope_dim;
    c.rope.head_dim = c.mla.qk_rope_dim;
    c.n_kv_heads = c.n_heads;
  } else {
    c.rope.head_dim = c.head_dim;
  }
}

}  // namespace

std::optional<ModelConfig> synthetic_preset(Arch arch, const std::string& preset) {
  ModelConfig c;
  c.arch = arch;
  c.tied_output = true;
  c.rope.theta = 10000.0;
  c.rms_eps = 1e-5f;
  const bool qwen = is_qwen(arch);
  if (is_qwen3(arch)) {
    if (!qwen3_preset(arch, preset, c)) return std::nullopt;  // synthetic/qwen3_shapes.h
  } else if (arch == Arch::Smollm3 || is_gemma3(arch)) {
    if (!layer_kind_preset(arch, preset, c)) return std::nullopt;  // synthetic/layer_kind_shapes.h
    c.rope.n_rot = c.head_dim;
    finish_rope(c);
    return c;
  } else if (arch == Arch::Phi3) {
    if (!phi3_preset(preset, c)) return std::nullopt;  // synthetic/phi3_shapes.h
    return c;
  } else if (is_gpt_oss(arch)) {
    if (!gpt_oss_preset(preset, c)) return std::nullopt;  // synthetic/gpt_oss_shapes.h
    return c;
  } else if (preset == "tiny") {
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 16;
    c.ffn_dim = 128;
    c.n_vocab = 512;
    c.ctx_len = 1024;
    if (arch == Arch::Qwen2Vl) c.rope.sections = {2, 3, 3, 0};  // 8 pairs of the 16-dim head
    if (arch == Arch::Deepseek2) {
      c.mla = {32, 32, 16, 8, 16};  // q_lora, kv_lora, qk_nope, qk_rope, v_head
      c.tied_output = false;        // llama.cpp's deepseek2 loader requires output.weight
    }
  } else if (preset == "0.5b" && (arch == Arch::Llama || arch == Arch::Qwen2)) {
    // Qwen2.5-0.5B's text decoder
    c.dim = 896;
    c.n_layers = 24;
    c.n_heads = 14;
    c.n_kv_heads = 2;
    c.head_dim = 64;
    c.ffn_dim = 4864;
    c.n_vocab = 151936;
    c.ctx_len = 32768;
    c.rope.theta = 1000000.0;
    c.rms_eps = 1e-6f;
  } else if ((preset == "3b" || preset == "7b") && arch == Arch::Qwen2) {
    // Qwen2.5-3B's text decoder (tied output) and Qwen2.5-7B's (its own output matrix)
    const bool b7 = preset == "7b";
    c.dim = b7 ? 3584 : 2048;
    c.n_layers = b7 ? 28 : 36;
    c.n_heads = b7 ? 28 : 16;
    c.n_kv_heads = b7 ? 4 : 2;
    c.head_dim = 128;
    c.ffn_dim = b7 ? 18944 : 11008;
    c.n_vocab = b7 ? 152064 : 151936;
    c.tied_output = !b7;
    c.ctx_len = 32768;
    c.rope.theta = 1000000.0;
    c.rms_eps = 1e-6f;
  } else if (preset == "2b" && arch == Arch::Qwen2Vl) {
    // Qwen2-VL-2B's text decoder: M-RoPE sections [16, 24, 24] over the 64 pairs of a 128 head
    c.dim = 1536;
    c.n_layers = 28;
    c.n_heads = 12;
    c.n_kv_heads = 2;
    c.head_dim = 128;
    c.ffn_dim = 8960;
    c.n_vocab = 151936;
    c.ctx_len = 32768;
    c.rope.theta = 1000000.0;
    c.rms_eps = 1e-6f;
    c.rope.sections = {16, 24, 24, 0};
  } else if (preset == "3b" && arch == Arch::Qwen2Vl) {
    // Qwen2.5-VL-3B's text decoder: M-RoPE sections [16, 24, 24] over the 64 pairs of a 128 head
    c.dim = 2048;
    c.n_layers = 36;
    c.n_heads = 16;
    c.n_kv_heads = 2;
    c.head_dim = 128;
    c.ffn_dim = 11008;
    c.n_vocab = 151936;
    c.ctx_len = 32768;
    c.rope.theta = 1000000.0;
    c.rms_eps = 1e-6f;
    c.rope.sections = {16, 24, 24, 0};
  } else if (arch == Arch::Deepseek2 && (preset == "tiny-moe" || preset == "kimi-vl-tiny")) {
    c = *synthetic_preset(arch, "tiny");
    deepseek2_preset(preset, c);  // synthetic/deepseek2_shapes.h: MoE layers and YaRN
  } else if (arch == Arch::Deepseek2 && deepseek2_preset(preset, c)) {
    // lite (DeepSeek-V2-Lite), lite-attn (its attention, a dense FFN): synthetic/deepseek2_shapes.h
  } else {
    return std::nullopt;
  }
  c.qkv_bias = is_qwen2(arch);
  c.rope.layout = qwen ? RopeLayout::Neox : RopeLayout::Normal;
  c.rope.n_rot = c.head_dim;
  if (arch == Arch::Qwen2Vl) c.rope.mrope = MropeMode::Blocked;
  if (arch == Arch::Deepseek2) c.attention = AttentionKind::Mla;
  finish_rope(c);
  return c;
}

namespace {

// sections=t:h:w[:extra]: rotary pairs per M-RoPE component.
Status parse_sections(const std::string& val, ModelConfig& c) {
  std::stringstream vs(val);
  std::string part;
  int i = 0;
  c.rope.sections = {0, 0, 0, 0};
  while (std::getline(vs, part, ':')) {
    if (i == 4)
      return make_error(ErrorCode::InvalidArgument, "--dims: sections takes at most 4 values");
    char* end = nullptr;
    const long v = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 0 || v > 4096)
      return make_error(ErrorCode::InvalidArgument, "--dims: '{}' in sections={} is not a count",
                        part, val);
    c.rope.sections[i++] = int(v);
  }
  return Status::Ok();
}

// mrope=blocked|interleaved.
Status parse_mrope(const std::string& val, ModelConfig& c) {
  if (val == "blocked")
    c.rope.mrope = MropeMode::Blocked;
  else if (val == "interleaved")
    c.rope.mrope = MropeMode::Interleaved;
  else
    return make_error(ErrorCode::InvalidArgument, "--dims: mrope={} (blocked or interleaved)", val);
  return Status::Ok();
}

// A numeric key=x of every architecture or MLA's; false for a key it does not know.
bool set_number(ModelConfig& c, const std::string& key, double x, bool* rot_set) {
  const int i = int(x);
  if (key == "dim")
    c.dim = i;
  else if (key == "layers")
    c.n_layers = i;
  else if (key == "heads")
    c.n_heads = i;
  else if (key == "kv_heads")
    c.n_kv_heads = i;
  else if (key == "head_dim")
    c.head_dim = i;
  else if (key == "ffn")
    c.ffn_dim = i;
  else if (key == "vocab")
    c.n_vocab = i;
  else if (key == "ctx")
    c.ctx_len = i;
  else if (key == "rope_dims") {
    c.rope.n_rot = i;
    *rot_set = true;
  } else if (key == "theta")
    c.rope.theta = x;
  else if (key == "eps")
    c.rms_eps = float(x);
  else if (key == "bias")
    c.qkv_bias = i != 0;
  else if (key == "tied")
    c.tied_output = i != 0;
  else if (key == "deepstack")
    c.n_deepstack = i;
  else if (key == "q_lora")
    c.mla.q_lora_rank = i;
  else if (key == "kv_lora")
    c.mla.kv_lora_rank = i;
  else if (key == "qk_nope")
    c.mla.qk_nope_dim = i;
  else if (key == "qk_rope")
    c.mla.qk_rope_dim = i;
  else if (key == "v_head")
    c.mla.v_head_dim = i;
  else
    return false;
  return true;
}

// One "key=value" item of --dims.
Status apply_dim(ModelConfig& c, const std::string& item, bool* rot_set) {
  const auto eq = item.find('=');
  if (eq == std::string::npos)
    return make_error(ErrorCode::InvalidArgument, "--dims: '{}' is not key=value", item);
  const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
  if (key == "sections") return parse_sections(val, c);
  if (key == "mrope") return parse_mrope(val, c);
  double x = 0;
  auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), x);
  if (ec != std::errc() || p != val.data() + val.size())
    return make_error(ErrorCode::InvalidArgument, "--dims: '{}' is not a number in '{}'", val,
                      item);
  if (set_number(c, key, x, rot_set) || apply_deepseek2_dim(c, key, x)) return Status::Ok();
  return make_error(ErrorCode::InvalidArgument,
                    "--dims: unknown key '{}' (dim, layers, heads, kv_heads, head_dim, ffn, "
                    "vocab, ctx, rope_dims, theta, eps, bias, tied; qwen2vl: sections=t:h:w, "
                    "mrope=blocked|interleaved; qwen3vl: sections, deepstack; deepseek2: q_lora, "
                    "kv_lora, qk_nope, qk_rope, "
                    "v_head, experts, experts_used, shared_experts, expert_ffn, dense_lead, "
                    "moe_norm, moe_scale, sigmoid, sel_bias, groups, groups_used, yarn, "
                    "yarn_orig, yarn_log_mul)",
                    key);
}

}  // namespace

Status apply_dims(ModelConfig& c, const std::string& dims) {
  std::stringstream ss(dims);
  std::string item;
  const bool rot_follows_head = c.rope.n_rot == c.head_dim;
  bool rot_set = false;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    KAMERA_TRY(apply_dim(c, item, &rot_set));
  }
  if (c.attention != AttentionKind::Mla && rot_follows_head && !rot_set) c.rope.n_rot = c.head_dim;
  finish_rope(c);
  if (c.arch == Arch::Smollm3) c.layer_kinds.kinds = smollm3_layer_kinds(c.n_layers);
  if (is_gemma3(c.arch) && c.layer_kinds.window > 0)
    c.layer_kinds.kinds = gemma3_layer_kinds(c.n_layers, 6);
  if (is_gemma3(c.arch)) c.attn_scale = float(1.0 / std::sqrt(double(c.head_dim)));
  finish_gpt_oss(c);  // synthetic/gpt_oss_shapes.h
  return c.validate("--dims");
}

std::vector<std::string> llama_cpp_incompatibilities(const ModelConfig& c) {
  std::vector<std::string> out;
  if (c.attention != AttentionKind::Mla && c.rope.n_rot != c.head_dim && c.arch != Arch::Phi3)
    out.push_back(
        "partial rotary (rope_dims < head_dim): llama.cpp's llama/qwen2 loaders require "
        "rope.dimension_count == head_dim");
  if (is_qwen2(c.arch) && !c.qkv_bias)
    out.push_back("qwen2 without attn_q/k/v biases: llama.cpp requires them for this architecture");
  if (is_qwen3(c.arch) && c.qkv_bias)
    out.push_back("qwen3 with attn_q/k/v biases: llama.cpp's qwen3 loaders do not read them");
  if (is_qwen2(c.arch) && c.head_dim * c.n_heads != c.dim)
    out.push_back(
        "qwen2 with head_dim * heads != dim: llama.cpp expects attn_q of shape {dim, dim}");
  if (is_qwen3vl(c.arch)) {  // pairs ggml's IMROPE gives its 4th component (model/qwen3vl.h)
    int extra = 0;
    for (int i = 0; i < c.rope.n_pairs(); ++i)
      extra += !(i % 3 == 0 && i < 3 * c.rope.sections[0]) &&
               !(i % 3 == 1 && i < 3 * c.rope.sections[1]) &&
               !(i % 3 == 2 && i < 3 * c.rope.sections[2]);
    if (extra > 0)
      out.push_back(fmt::format(
          "qwen3vl: llama.cpp leaves {} of the {} rope pairs unrotated (they read its 4th "
          "position component, 0), where Hugging Face and kamera turn them by t",
          extra, c.rope.n_pairs()));
  }
  if (c.rope.mrope == MropeMode::Interleaved && c.arch == Arch::Qwen2Vl)
    out.push_back(
        "interleaved M-RoPE is a kamera key (qwen2vl.rope.mrope_interleaved) that "
        "llama.cpp's qwen2vl ignores: it would rotate blocked sections");
  if (c.attention == AttentionKind::Mla && (c.n_layers == 27) != (c.mla.q_lora_rank == 0))
    out.push_back(
        "deepseek2: llama.cpp (Feb 2025) infers 'no q low-rank' from 27 layers (V2-Lite): "
        "use q_lora = 0 exactly when layers = 27");
  if (c.attention == AttentionKind::Mla && c.tied_output)
    out.push_back("deepseek2 with a tied output head: llama.cpp requires output.weight");
  deepseek2_llama_cpp_notes(c, out);
  return out;
}

int64_t count_parameters(const ModelConfig& c) {
  const int64_t d = c.dim, q = c.q_width(), kv = c.kv_width(), h = c.ffn_dim;
  int64_t layer = 2 * d + 3 * d * h;  // norms, SwiGLU
  if (c.attention == AttentionKind::Mla) {
    const MlaConfig& m = c.mla;
    layer +=
        m.q_lora_rank > 0 ? d * m.q_lora_rank + m.q_lora_rank + int64_t(m.q_lora_rank) * q : d * q;
    layer += d * (m.kv_lora_rank + m.qk_rope_dim) + m.kv_lora_rank +
             int64_t(m.kv_lora_rank) * c.n_heads * (m.qk_nope_dim + m.v_head_dim) +
             int64_t(c.n_heads) * m.v_head_dim * d;
  } else {
    layer += d * q + 2 * d * kv + q * d + (c.qkv_bias ? q + 2 * kv : 0);
    if (c.qk_norm) layer += 2 * c.head_dim;
    if (is_gemma3(c.arch)) layer += 2 * d;  // post norms
  }
  const int64_t longrope =
      int64_t(c.longrope.short_factors.size() + c.longrope.long_factors.size());
  return int64_t(c.n_vocab) * d * (c.tied_output ? 1 : 2) + d + int64_t(c.n_layers) * layer +
         moe_extra_parameters(c) + gpt_oss_extra_parameters(c) + longrope;
}

namespace {

// The pieces of a synthetic vocabulary that end `skip` pieces before its end become the control
// tokens `names`. False (nothing changed) when the vocabulary is too small: its byte pieces stay.
bool add_control_tokens(Tokenizer::Vocab& v, const std::vector<std::string>& names, size_t skip) {
  const size_t n = v.pieces.size(), k = names.size();
  if (n < 300 + skip + k) return false;
  for (size_t i = 0; i < k; ++i) {
    const size_t at = n - skip - k + i;
    v.pieces[at] = names[i];
    v.types[at] = TokenType::Control;
    if (!v.scores.empty()) v.scores[at] = 0.0f;
  }
  return true;
}

// A qwen2vl or qwen3vl decoder's vocabulary holds the Qwen-VL vision control tokens (the last four
// pieces of a synthetic vocabulary become them), so that prompts with images can be written for it.
void add_vision_tokens(Tokenizer::Vocab& v) {
  add_control_tokens(v, {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"},
                     0);
}

}  // namespace

Status write_synthetic_gguf(const SyntheticSpec& spec, const std::string& path) {
  Result<Tokenizer::Vocab> vocab =
      spec.vocab ? Result<Tokenizer::Vocab>(*spec.vocab)
                 : build_synthetic_vocab(spec.cfg.n_vocab, synthetic_vocab_corpus());
  if (!vocab.ok())
    return make_error(ErrorCode::InvalidArgument, "make-model: vocabulary: {}", vocab.message());
  if (!spec.vocab && is_mrope(spec.cfg.arch)) add_vision_tokens(*vocab);
  if (!spec.vocab && spec.reranker) add_rerank_labels(*vocab, spec.control_tokens.size());
  if (!spec.vocab && spec.cfg.arch == Arch::Phi3) {  // synthetic/phi3_shapes.h
    add_control_tokens(*vocab, phi3_control_tokens(), 0);
    vocab->chat_template = phi3_chat_template();
  }
  if (!spec.control_tokens.empty() &&
      (spec.vocab ||
       !add_control_tokens(*vocab, spec.control_tokens,
                           is_mrope(spec.cfg.arch)       ? 4
                           : spec.cfg.arch == Arch::Phi3 ? phi3_control_tokens().size()
                                                         : 0)))
    return make_error(ErrorCode::InvalidArgument,
                      "make-model: control tokens go into the synthetic vocabulary of 300 pieces "
                      "or more (not with --vocab: give them in its tokenizer.json)");
  const uint64_t seed = spec.seed;
  const float inv_sqrt_d = 1.0f / std::sqrt(float(spec.cfg.dim));
  auto fill = [seed, inv_sqrt_d](const std::string& name, const std::vector<int64_t>& ne,
                                 float* dst) {
    int64_t n = 1;
    for (int64_t e : ne) n *= e;
    const bool is_norm = name.find("norm") != std::string::npos;
    if (ne.size() == 1 && is_norm) {
      fill_norm(dst, n, seed, name);
    } else if (ne.size() == 1) {
      fill_uniform(dst, n, seed, name, 0.1f);  // biases
    } else if (name == "token_embd.weight") {
      fill_uniform(dst, n, seed, name, inv_sqrt_d);
    } else {
      // Uniform with the variance of N(0, 1/in): activations keep unit scale through the layers.
      fill_uniform(dst, n, seed, name, 1.0f / std::sqrt(float(ne[0])));
    }
  };
  if (spec.reranker)
    return write_reranker_gguf(spec.cfg, spec.name, spec.weight_type, *vocab, fill, path);
  return write_decoder_gguf(spec.cfg, spec.name, spec.weight_type, *vocab, fill, path);
}

namespace {

namespace gk = gguf_key;

// What a decoder file of c.arch must be, and the vocabulary it carries.
Status check_decoder(const ModelConfig& c, const Tokenizer::Vocab& v) {
  const bool qwen = is_neox_rope(c.arch) || is_gemma3(c.arch);
  if (qwen && c.rope.layout != RopeLayout::Neox)
    return make_error(
        ErrorCode::InvalidArgument,
        "make-model: qwen2, qwen2vl, qwen3, gemma3 and phi3 use the NeoX rope layout");
  if (!qwen && c.rope.layout != RopeLayout::Normal)
    return make_error(ErrorCode::InvalidArgument,
                      "make-model: {} uses the normal (interleaved pair) rope layout",
                      arch_name(c.arch));
  if ((c.arch == Arch::Deepseek2) != (c.attention == AttentionKind::Mla))
    return make_error(ErrorCode::InvalidArgument,
                      "make-model: deepseek2 and only deepseek2 uses MLA");
  if (is_mrope(c.arch) != (c.rope.mrope != MropeMode::None))
    return make_error(ErrorCode::InvalidArgument,
                      "make-model: qwen2vl and qwen3vl, and only they, use M-RoPE sections");
  if ((is_qwen3(c.arch) || is_gemma3(c.arch)) != c.qk_norm)
    return make_error(ErrorCode::InvalidArgument,
                      "make-model: the qwen3 families, and only they, norm q and k per head");
  if (is_qwen3_moe(c.arch) &&
      (!c.moe.norm_weights || c.moe.n_shared != 0 || c.moe.n_dense_lead != 0 ||
       c.moe.weights_scale != 1.0f || c.rope.yarn.ext_factor != 0))
    return make_error(ErrorCode::InvalidArgument,
                      "make-model: qwen3moe has MoE in every layer, normalized and unscaled top-k "
                      "weights, no shared experts and no YaRN (model/qwen3.h)");
  if (is_gpt_oss(c.arch) && (c.dim % kQK != 0 || c.moe.expert_ffn % kQK != 0))
    return make_error(ErrorCode::InvalidArgument,
                      "make-model: gpt-oss's MXFP4 experts need dim ({}) and expert_ffn ({}) to "
                      "be multiples of {}",
                      c.dim, c.moe.expert_ffn, kQK);
  if (int(v.pieces.size()) != c.n_vocab)
    return make_error(ErrorCode::InvalidArgument,
                      "make-model: the vocabulary has {} pieces, the config {}", v.pieces.size(),
                      c.n_vocab);
  return Status::Ok();
}

// general.* and the {arch}.* hyperparameters, as model/load_gguf.cpp reads them back.
void write_hparams(GgufWriter& w, const ModelConfig& c, const std::string& model_name,
                   DType weight_type) {
  const std::string a = arch_name(c.arch);
  const auto k = [&a](const char* suffix) { return gk::arch_key(a, suffix); };
  w.set_string(gk::kArchitecture, a);
  w.set_string(gk::kName, model_name);
  const uint32_t file_type = weight_type == DType::F32    ? 0
                             : weight_type == DType::F16  ? 1
                             : weight_type == DType::Q8_0 ? 7
                                                          : 32;
  w.set_u32(gk::kFileType, file_type);
  w.set_u32(k(gk::kContextLength), uint32_t(c.ctx_len));
  w.set_u32(k(gk::kEmbeddingLength), uint32_t(c.dim));
  w.set_u32(k(gk::kBlockCount), uint32_t(c.n_layers));
  w.set_u32(k(gk::kFeedForwardLength), uint32_t(c.ffn_dim));
  w.set_u32(k(gk::kHeadCount), uint32_t(c.n_heads));
  const bool split_mla =
      c.attention == AttentionKind::Mla && c.mla.file_layout == MlaFileLayout::Split;
  w.set_u32(k(gk::kHeadCountKv), split_mla ? 1u : uint32_t(c.n_kv_heads));
  if (split_mla) {  // llama.cpp's current MLA layout (model/deepseek2.h)
    w.set_u32(k(gk::kKeyLength), uint32_t(c.mla.kv_lora_rank + c.mla.qk_rope_dim));
    w.set_u32(k(gk::kValueLength), uint32_t(c.mla.kv_lora_rank));
    w.set_u32(k(gk::kKeyLengthMla), uint32_t(c.head_dim));
    w.set_u32(k(gk::kValueLengthMla), uint32_t(c.mla.v_head_dim));
  }
  if (c.attention == AttentionKind::Mla) {
    if (!split_mla) w.set_u32(k(gk::kKeyLength), uint32_t(c.head_dim));
    if (!split_mla) w.set_u32(k(gk::kValueLength), uint32_t(c.mla.v_head_dim));
    if (c.mla.q_lora_rank > 0) w.set_u32(k(gk::kQLoraRank), uint32_t(c.mla.q_lora_rank));
    w.set_u32(k(gk::kKvLoraRank), uint32_t(c.mla.kv_lora_rank));
    write_deepseek2_keys(w, c);  // MoE and YaRN keys (synthetic/deepseek2_shapes.h)
  } else if (c.head_dim * c.n_heads != c.dim) {
    w.set_u32(k(gk::kKeyLength), uint32_t(c.head_dim));
    w.set_u32(k(gk::kValueLength), uint32_t(c.head_dim));
  }
  write_qwen3moe_keys(w, c);    // qwen3moe, qwen3vl(moe): synthetic/qwen3_shapes.h
  write_layer_kind_keys(w, c);  // gemma3: synthetic/layer_kind_shapes.h
  write_phi3_keys(w, c);        // phi3: synthetic/phi3_shapes.h
  write_gpt_oss_keys(w, c);     // gpt-oss: synthetic/gpt_oss_shapes.h
  w.set_u32(k(gk::kRopeDimensionCount), uint32_t(c.rope.n_rot));
  if (c.rope.mrope != MropeMode::None) {
    w.set_i32_array(k(gk::kRopeDimensionSections), {c.rope.sections[0], c.rope.sections[1],
                                                    c.rope.sections[2], c.rope.sections[3]});
    if (c.rope.mrope == MropeMode::Interleaved && !is_qwen3vl(c.arch))
      w.set_bool(k(gk::kRopeMropeInterleaved), true);
  }
  w.set_f32(k(gk::kRopeFreqBase), float(c.rope.theta));
  w.set_f32(k(gk::kRmsEps), c.rms_eps);
  w.set_u32(k(gk::kVocabSize), uint32_t(c.n_vocab));
}

// Adds the decoder's tensors with llama.cpp's names, each filled by `fill` when written:
// matrices in the weight type, norms and biases in f32.
class DecoderTensors {
 public:
  DecoderTensors(GgufWriter& w, const ModelConfig& c, DType wt, const TensorFill& fill)
      : w_(w), c_(c), wt_(wt), fill_(fill) {}

  void add_all() {
    const int64_t d = c_.dim, V = c_.n_vocab;
    weight("token_embd.weight", d, V);
    norm("output_norm.weight", d);
    if (!c_.tied_output) weight("output.weight", d, V);
    if (c_.longrope.enabled()) {  // phi3: the config's factor sets (model/phi3.h)
      values("rope_factors_long.weight", c_.longrope.long_factors);
      values("rope_factors_short.weight", c_.longrope.short_factors);
    }
    for (int i = 0; i < c_.n_layers; ++i) add_layer(i);
  }

 private:
  void weight(const std::string& name, int64_t in, int64_t out) {
    const TensorFill& fill = fill_;
    w_.add_tensor(name, {in, out}, wt_, [=, &fill](float* dst) { fill(name, {in, out}, dst); });
  }
  void norm(const std::string& name, int64_t n) {  // and biases
    const TensorFill& fill = fill_;
    w_.add_tensor(name, {n}, DType::F32, [=, &fill](float* dst) { fill(name, {n}, dst); });
  }

  void values(const std::string& name, const std::vector<float>& v) {
    w_.add_tensor(name, {int64_t(v.size())}, DType::F32,
                  [v](float* dst) { std::copy(v.begin(), v.end(), dst); });
  }

  void add_mla_attention(const std::string& p) {
    const MlaConfig& m = c_.mla;
    const int64_t d = c_.dim, q = c_.q_width();
    if (m.q_lora_rank > 0) {
      weight(p + "attn_q_a.weight", d, m.q_lora_rank);
      norm(p + "attn_q_a_norm.weight", m.q_lora_rank);
      weight(p + "attn_q_b.weight", m.q_lora_rank, q);
    } else {
      weight(p + "attn_q.weight", d, q);
    }
    weight(p + "attn_kv_a_mqa.weight", d, m.kv_lora_rank + m.qk_rope_dim);
    norm(p + "attn_kv_a_norm.weight", m.kv_lora_rank);
    if (m.file_layout == MlaFileLayout::KvB)
      weight(p + "attn_kv_b.weight", m.kv_lora_rank,
             int64_t(c_.n_heads) * (m.qk_nope_dim + m.v_head_dim));
    else
      add_mla_k_b_v_b(p);
    weight(p + "attn_output.weight", int64_t(c_.n_heads) * m.v_head_dim, d);
  }

  // llama.cpp's converter splits kv_b per head into k_b (transposed) and v_b: the same values as
  // the KvB file of this seed holds. A Q8_0 tensor whose rows are not whole blocks is f16, as the
  // converter falls back.
  void add_mla_k_b_v_b(const std::string& p) {
    const MlaConfig& m = c_.mla;
    const int64_t L = m.kv_lora_rank, H = c_.n_heads, nope = m.qk_nope_dim, v = m.v_head_dim;
    const std::string kv_b = p + "attn_kv_b.weight";
    const std::vector<int64_t> kv_ne = {L, H * (nope + v)};
    const TensorFill& fill = fill_;
    const ModelConfig& c = c_;
    auto split = [=, &fill, &c](bool k, float* dst) {
      std::vector<float> all(size_t(L * H * (nope + v)));
      fill(kv_b, kv_ne, all.data());
      split_mla_kv_b(c.mla, c.n_heads, all.data(), k ? dst : nullptr, k ? nullptr : dst);
    };
    auto type = [this](int64_t row) {
      return wt_ == DType::Q8_0 && row % kQ8BlockSize != 0 ? DType::F16 : wt_;
    };
    w_.add_tensor(p + "attn_k_b.weight", {nope, L, H}, type(nope),
                  [split](float* dst) { split(true, dst); });
    w_.add_tensor(p + "attn_v_b.weight", {L, v, H}, type(L),
                  [split](float* dst) { split(false, dst); });
  }

  void add_attention(const std::string& p) {
    const int64_t d = c_.dim, q = c_.q_width(), kv = c_.kv_width();
    if (c_.arch == Arch::Phi3) {  // fused q, k, v rows, as llama.cpp's converter writes them
      weight(p + "attn_qkv.weight", d, q + 2 * kv);
      weight(p + "attn_output.weight", q, d);
      return;
    }
    weight(p + "attn_q.weight", d, q);
    weight(p + "attn_k.weight", d, kv);
    weight(p + "attn_v.weight", d, kv);
    if (c_.qk_norm) {  // qwen3
      norm(p + "attn_q_norm.weight", c_.head_dim);
      norm(p + "attn_k_norm.weight", c_.head_dim);
    }
    if (c_.qkv_bias) {
      norm(p + "attn_q.bias", q);
      norm(p + "attn_k.bias", kv);
      norm(p + "attn_v.bias", kv);
    }
    weight(p + "attn_output.weight", q, d);
  }

  // gpt-oss (model/gpt_oss.h): q/k/v/o, the MoE matrices (experts in MXFP4, the router f32, as
  // llama.cpp's converter writes them), then every f32 vector the loader reads.
  void add_gpt_oss_layer(int i, const std::string& p) {
    const int64_t d = c_.dim, q = c_.q_width(), kv = c_.kv_width();
    weight(p + "attn_q.weight", d, q);
    weight(p + "attn_k.weight", d, kv);
    weight(p + "attn_v.weight", d, kv);
    weight(p + "attn_output.weight", q, d);
    const TensorFill& fill = fill_;
    for (const MoeTensorSpec& t : moe_layer_tensors(c_, i))
      w_.add_tensor(t.name, t.ne, t.keep_f32 ? GgmlType::F32 : GgmlType::MXFP4,
                    [t, &fill](float* dst) { fill(t.name, t.ne, dst); });
    LayerWeights unused;
    for (const GptOssVector& v : gpt_oss_layer_vectors(c_, unused)) {
      const std::string name = p + v.suffix;
      const std::vector<int64_t> ne = v.ne;
      w_.add_tensor(name, ne, DType::F32, [name, ne, &fill](float* dst) { fill(name, ne, dst); });
    }
  }

  void add_layer(int i) {
    const int64_t d = c_.dim, h = c_.ffn_dim;
    const std::string p = "blk." + std::to_string(i) + ".";
    norm(p + "attn_norm.weight", d);
    if (is_gpt_oss(c_.arch)) return add_gpt_oss_layer(i, p);
    if (c_.attention == AttentionKind::Mla) {
      add_mla_attention(p);
    } else {
      add_attention(p);
    }
    if (is_gemma3(c_.arch)) {  // model/layer_kinds.h
      norm(p + "post_attention_norm.weight", d);
      norm(p + "post_ffw_norm.weight", d);
    }
    norm(p + "ffn_norm.weight", d);
    if (c_.moe.is_moe_layer(i)) {
      const TensorFill& fill = fill_;
      for (const MoeTensorSpec& t : moe_layer_tensors(c_, i))
        w_.add_tensor(t.name, t.ne, t.keep_f32 ? DType::F32 : wt_,
                      [t, &fill](float* dst) { fill(t.name, t.ne, dst); });
      return;
    }
    if (c_.arch == Arch::Phi3) {  // gate rows then up rows in one ffn_up
      weight(p + "ffn_up.weight", d, 2 * h);
      weight(p + "ffn_down.weight", h, d);
      return;
    }
    weight(p + "ffn_gate.weight", d, h);
    weight(p + "ffn_up.weight", d, h);
    weight(p + "ffn_down.weight", h, d);
  }

  GgufWriter& w_;
  const ModelConfig& c_;
  DType wt_;
  const TensorFill& fill_;
};

}  // namespace

Status write_decoder_gguf(const ModelConfig& c, const std::string& model_name, DType weight_type,
                          const Tokenizer::Vocab& v, const TensorFill& fill,
                          const std::string& path, const std::function<void(GgufWriter&)>& extra) {
  KAMERA_TRY(c.validate(path));
  KAMERA_TRY(check_decoder(c, v));
  GgufWriter w;
  write_hparams(w, c, model_name, weight_type);
  write_tokenizer_gguf(w, v);
  DecoderTensors(w, c, weight_type, fill).add_all();
  if (extra) extra(w);
  return w.write(path);
}

}  // namespace kamera
