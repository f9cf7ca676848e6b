// Models from GGUF files with llama.cpp's key and tensor names (architectures llama, qwen2,
// qwen2vl, deepseek2, qwen3, qwen3moe, qwen3vl, qwen3vlmoe, smollm3, gemma3, phi3, gpt-oss). Weight
// matrices stay in the file's type and point into its mapping.
//
// load_gguf_model in steps: the architecture (read_arch), the hyperparameters (read_config: the
// shape, MLA, M-RoPE sections, rope frequency and scaling, what the tensors present imply), the
// weights (load_weights: the head, then each layer's attention and FFN), the check that no
// tensor is left unread, and the embedded tokenizer.
#include <malloc.h>

#include <set>

#include "core/log.h"
#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "model/deepseek2.h"
#include "model/gpt_oss.h"
#include "model/layer_kinds.h"
#include "model/model.h"
#include "model/phi3.h"
#include "model/qwen3.h"
#include "model/qwen3vl.h"
#include "model/repack.h"
#include "tokenizer/gguf_import.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

class GgufModelReader {
 public:
  GgufModelReader(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  const std::string& arch() const { return arch_; }

  Result<int64_t> need_int(const std::string& key) const {
    auto v = f_.get_int(gk::arch_key(arch_, key));
    if (!v)
      return make_error(ErrorCode::CorruptData, "{}: missing metadata key '{}.{}'", f_.name(),
                        arch_, key);
    return *v;
  }
  // A hyperparameter that must be present and in [1, INT32_MAX].
  Status need_count(const char* key, int& out) const {
    auto v = need_int(key);
    if (!v.ok()) return v.error();
    if (*v <= 0 || *v > INT32_MAX)
      return make_error(ErrorCode::CorruptData, "{}: {}.{} = {} is out of range", f_.name(), arch_,
                        key, *v);
    out = int(*v);
    return Status::Ok();
  }
  int64_t int_or(const std::string& key, int64_t dflt) const {
    return f_.get_int(gk::arch_key(arch_, key)).value_or(dflt);
  }
  double float_or(const std::string& key, double dflt) const {
    return f_.get_float(gk::arch_key(arch_, key)).value_or(dflt);
  }

  // Finds tensor `name` and checks its shape (ne order, ne[0] contiguous).
  Result<const GgufTensor*> find(const std::string& name, const std::vector<int64_t>& ne,
                                 bool optional) {
    const GgufTensor* t = f_.find_tensor(name);
    if (!t) {
      if (optional) return nullptr;
      return make_error(ErrorCode::CorruptData, "{}: missing tensor '{}'", f_.name(), name);
    }
    if (t->ne != ne) {
      auto fmt_ne = [](const std::vector<int64_t>& v) {
        return fmt::format("[{}]", fmt::join(v, ", "));
      };
      return make_error(ErrorCode::CorruptData,
                        "{}: tensor '{}' has shape {} but the metadata implies {}", f_.name(), name,
                        fmt_ne(t->ne), fmt_ne(ne));
    }
    used_.insert(name);
    return t;
  }

  // Reads a norm or bias vector as f32.
  Status tensor(const std::string& name, std::vector<int64_t> ne, std::vector<float>& dst,
                bool optional = false) {
    KAMERA_ASSIGN_OR_RETURN(const GgufTensor* t, find(name, ne, optional));
    if (t == nullptr) return Status::Ok();
    KAMERA_ASSIGN_OR_RETURN(dst, f_.read_f32(*t));
    return Status::Ok();
  }

  // A weight matrix {cols, rows} in its file type, pointing into the mapped file; a stack of
  // matrices {cols, rows, n} is one matrix of n * rows rows.
  Status weight(const std::string& name, std::vector<int64_t> ne, Weight& dst) {
    KAMERA_ASSIGN_OR_RETURN(const GgufTensor* t, find(name, ne, false));
    auto w = Weight::borrow(t->type, t->data, ne[1] * (ne.size() > 2 ? ne[2] : 1), ne[0]);
    if (!w.ok()) return make_error(w.code(), "{}: tensor '{}': {}", f_.name(), name, w.message());
    dst = std::move(w.value());
    return Status::Ok();
  }

  // A weight matrix held in f32 (one dequantized copy).
  Status weight_f32(const std::string& name, std::vector<int64_t> ne, Weight& dst) {
    std::vector<float> v;
    KAMERA_TRY(tensor(name, ne, v));
    dst = Weight::from_f32(std::move(v), ne[1], ne[0]);
    return Status::Ok();
  }
  const std::set<std::string>& used() const { return used_; }

 private:
  const GgufFile& f_;
  std::string arch_;
  std::set<std::string> used_;
};

// general.architecture, one of the architectures kamera runs; its name in *name.
Result<Arch> read_arch(const GgufFile& f, std::string* name) {
  const auto arch = f.get_string(gk::kArchitecture);
  if (!arch)
    return make_error(ErrorCode::CorruptData, "{}: missing {}", f.name(), gk::kArchitecture);
  const std::optional<Arch> kind = arch_from_name(*arch);
  if (!kind)
    return make_error(ErrorCode::Unsupported,
                      "{}: architecture '{}' is not supported (supported: {})", f.name(), *arch,
                      arch_names());
  *name = *arch;
  return *kind;
}

// The shape every architecture has: widths, depth, heads, norm epsilon, the rotated channels.
Status read_shape(const GgufModelReader& r, const std::string& path, ModelConfig& c) {
  KAMERA_TRY(r.need_count(gk::kEmbeddingLength, c.dim));
  KAMERA_TRY(r.need_count(gk::kBlockCount, c.n_layers));
  KAMERA_TRY(r.need_count(gk::kFeedForwardLength, c.ffn_dim));
  KAMERA_TRY(r.need_count(gk::kHeadCount, c.n_heads));
  KAMERA_TRY(r.need_count(gk::kContextLength, c.ctx_len));
  c.n_kv_heads = int(r.int_or(gk::kHeadCountKv, c.n_heads));
  c.head_dim = int(r.int_or(gk::kKeyLength, c.n_heads > 0 ? c.dim / c.n_heads : 0));
  if (c.arch != Arch::Deepseek2 && r.int_or(gk::kValueLength, c.head_dim) != c.head_dim)
    return make_error(ErrorCode::Unsupported, "{}: key_length != value_length is not supported",
                      path);
  c.rms_eps = float(r.float_or(gk::kRmsEps, 1e-5));
  c.rope.layout = is_neox_rope(c.arch) || is_gemma3(c.arch) ? RopeLayout::Neox : RopeLayout::Normal;
  c.rope.head_dim = c.head_dim;
  c.rope.n_rot = int(r.int_or(gk::kRopeDimensionCount, c.head_dim));
  return Status::Ok();
}

// DeepSeek-V2 MLA in either file layout (model/deepseek2.h: the per-head widths and one KV head
// per query head), rope.dimension_count = qk_rope; then its MoE layers and YaRN.
Status read_mla(const GgufModelReader& r, const GgufFile& f, ModelConfig& c) {
  c.attention = AttentionKind::Mla;
  c.mla.q_lora_rank = int(r.int_or(gk::kQLoraRank, 0));
  c.mla.kv_lora_rank = int(r.int_or(gk::kKvLoraRank, 0));
  KAMERA_TRY(read_mla_layout(f, c));
  c.mla.qk_rope_dim = c.rope.n_rot;
  c.mla.qk_nope_dim = c.head_dim - c.rope.n_rot;
  c.rope.head_dim = c.rope.n_rot;
  return read_deepseek2_hparams(f, c);
}

// The Qwen-VL decoders' M-RoPE: 3 or 4 sections of rotary pairs; qwen2vl's blocked unless the
// file says interleaved (a kamera key), qwen3vl's interleaved (model/qwen3vl.h).
Status read_mrope_sections(const GgufModelReader& r, const GgufFile& f, ModelConfig& c) {
  const std::string path = f.name(), sections = gk::arch_key(r.arch(), gk::kRopeDimensionSections);
  const auto* sec = f.get_int_array(sections);
  if (!sec || sec->size() < 3 || sec->size() > 4)
    return make_error(ErrorCode::CorruptData, "{}: {} must be an array of 3 or 4 integers", path,
                      sections);
  for (size_t i = 0; i < sec->size(); ++i) {
    if ((*sec)[i] < 0 || (*sec)[i] > 1 << 16)
      return make_error(ErrorCode::CorruptData, "{}: rope section {} = {} is out of range", path, i,
                        (*sec)[i]);
    c.rope.sections[i] = int((*sec)[i]);
  }
  c.rope.mrope =
      is_qwen3vl(c.arch) ||
              f.get_bool(gk::arch_key(r.arch(), gk::kRopeMropeInterleaved)).value_or(false)
          ? MropeMode::Interleaved
          : MropeMode::Blocked;
  return Status::Ok();
}

// rope.freq_base and linear rope scaling (deepseek2's YaRN is read with its MLA keys).
Status read_rope_frequency(const GgufModelReader& r, const GgufFile& f, ModelConfig& c) {
  c.rope.theta = r.float_or(gk::kRopeFreqBase, 10000.0);
  const auto scaling = f.get_string(gk::arch_key(r.arch(), gk::kRopeScalingType));
  if (scaling && *scaling == "linear") {
    const double factor = r.float_or(gk::kRopeScalingFactor, 1.0);
    if (!(factor > 0))
      return make_error(ErrorCode::CorruptData, "{}: rope.scaling.factor {} must be > 0", f.name(),
                        factor);
    c.rope.freq_scale = 1.0 / factor;
  } else if (scaling && *scaling != "none" && c.arch != Arch::Deepseek2 && !is_gpt_oss(c.arch)) {
    return make_error(ErrorCode::Unsupported,
                      "{}: rope scaling '{}' is not supported (none, linear)", f.name(), *scaling);
  }
  return Status::Ok();
}

// What the tensors present imply: the vocabulary size, a tied output head, q/k/v biases.
Status read_tensor_flags(const GgufModelReader& r, const GgufFile& f, ModelConfig& c) {
  const GgufTensor* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->ne.size() != 2)
    return make_error(ErrorCode::CorruptData, "{}: missing 2-D tensor 'token_embd.weight'",
                      f.name());
  c.n_vocab = int(r.int_or(gk::kVocabSize, embd->ne[1]));
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  c.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  return Status::Ok();
}

// The hyperparameters of c.arch, validated.
Status read_config(const GgufModelReader& r, const GgufFile& f, ModelConfig& c) {
  KAMERA_TRY(read_shape(r, f.name(), c));
  if (c.arch == Arch::Deepseek2) KAMERA_TRY(read_mla(r, f, c));
  if (is_mrope(c.arch)) KAMERA_TRY(read_mrope_sections(r, f, c));
  c.qk_norm = is_qwen3(c.arch);  // model/qwen3.h
  if (is_qwen3_moe(c.arch)) KAMERA_TRY(read_qwen3moe_hparams(f, c));
  if (is_qwen3vl(c.arch)) KAMERA_TRY(read_qwen3vl_hparams(f, c));
  if (c.arch == Arch::Phi3) KAMERA_TRY(read_phi3_hparams(f, c));  // model/phi3.h
  KAMERA_TRY(read_rope_frequency(r, f, c));
  KAMERA_TRY(read_layer_kinds(f, c));  // smollm3, gemma3 (model/layer_kinds.h)
  if (is_gpt_oss(c.arch)) KAMERA_TRY(read_gpt_oss_hparams(f, c));  // model/gpt_oss.h
  KAMERA_TRY(read_tensor_flags(r, f, c));
  return c.validate(f.name());
}

// The embedding, the final norm and the output head (a stored copy of the embedding is tied).
Status load_head(GgufModelReader& r, Model& m) {
  ModelConfig& c = m.cfg;
  const int64_t d = c.dim, V = c.n_vocab;
  KAMERA_TRY(r.weight("token_embd.weight", {d, V}, m.tok_embd));
  KAMERA_TRY(r.tensor("output_norm.weight", {d}, m.out_norm));
  if (c.tied_output) return Status::Ok();
  KAMERA_TRY(r.weight("output.weight", {d, V}, m.output));
  if (m.output.same_as(m.tok_embd)) {  // a stored copy of the embedding: same model as tied
    m.output = Weight();
    c.tied_output = true;
  }
  return Status::Ok();
}

// A reranker's classifier head, cls.output {dim, n_labels} (model/rerank.h): accepted for the
// architectures llama.cpp ranks with (the server reads it from the file); elsewhere it is left
// unread, and refused.
Status accept_rerank_head(GgufModelReader& r, const GgufFile& f, const ModelConfig& c) {
  const GgufTensor* t = f.find_tensor("cls.output.weight");
  if (!t || t->ne.size() != 2 || (c.arch != Arch::Qwen3 && c.arch != Arch::Qwen3Vl))
    return Status::Ok();
  auto found = r.find("cls.output.weight", {c.dim, t->ne[1]}, false);
  return found.ok() ? Status::Ok() : Status(found.error());
}

// MLA's projections: q (low-rank or full), the compressed kv with its rope band, kv_b (in f32;
// from attn_kv_b or from attn_k_b and attn_v_b), the output.
Status load_mla_attention(GgufModelReader& r, const ModelConfig& c, const std::string& p,
                          LayerWeights& l) {
  const MlaConfig& a = c.mla;
  const int64_t d = c.dim, q = c.q_width(), lat = a.kv_lora_rank, rope = a.qk_rope_dim,
                H = c.n_heads;
  if (a.q_lora_rank > 0) {
    KAMERA_TRY(r.weight(p + "attn_q_a.weight", {d, a.q_lora_rank}, l.wq_a));
    KAMERA_TRY(r.tensor(p + "attn_q_a_norm.weight", {a.q_lora_rank}, l.q_a_norm));
    KAMERA_TRY(r.weight(p + "attn_q_b.weight", {a.q_lora_rank, q}, l.wq_b));
  } else {
    KAMERA_TRY(r.weight(p + "attn_q.weight", {d, q}, l.wq));
  }
  KAMERA_TRY(r.weight(p + "attn_kv_a_mqa.weight", {d, lat + rope}, l.wkv_a));
  KAMERA_TRY(r.tensor(p + "attn_kv_a_norm.weight", {lat}, l.kv_a_norm));
  if (a.file_layout == MlaFileLayout::KvB) {
    KAMERA_TRY(
        r.weight_f32(p + "attn_kv_b.weight", {lat, H * (a.qk_nope_dim + a.v_head_dim)}, l.wkv_b));
  } else {  // attn_k_b (k_b transposed per head) and attn_v_b, joined into kv_b's rows
    std::vector<float> k_b, v_b;
    KAMERA_TRY(r.tensor(p + "attn_k_b.weight", {a.qk_nope_dim, lat, H}, k_b));
    KAMERA_TRY(r.tensor(p + "attn_v_b.weight", {lat, a.v_head_dim, H}, v_b));
    l.wkv_b = Weight::from_f32(join_mla_kv_b(a, c.n_heads, k_b, v_b),
                               H * (a.qk_nope_dim + a.v_head_dim), lat);
  }
  return r.weight(p + "attn_output.weight", {H * a.v_head_dim, d}, l.wo);
}

// Multi-head (or grouped-query) attention's q, k, v and output projections.
Status load_attention(GgufModelReader& r, const ModelConfig& c, const std::string& p,
                      LayerWeights& l) {
  const int64_t d = c.dim, q = c.q_width(), kv = c.kv_width();
  const GgufTensor* qkv = nullptr;  // phi3's fused q, k, v rows (model/phi3.h), or apart
  if (c.arch == Arch::Phi3) {
    KAMERA_ASSIGN_OR_RETURN(qkv, r.find(p + "attn_qkv.weight", {d, q + 2 * kv}, true));
  }
  if (qkv != nullptr) {
    KAMERA_ASSIGN_OR_RETURN(auto parts, split_rows(*qkv, {q, kv, kv}));
    l.wq = std::move(parts[0]), l.wk = std::move(parts[1]), l.wv = std::move(parts[2]);
    return r.weight(p + "attn_output.weight", {q, d}, l.wo);
  }
  KAMERA_TRY(r.weight(p + "attn_q.weight", {d, q}, l.wq));
  KAMERA_TRY(r.weight(p + "attn_k.weight", {d, kv}, l.wk));
  KAMERA_TRY(r.weight(p + "attn_v.weight", {d, kv}, l.wv));
  if (c.qk_norm) {  // qwen3: one RMSNorm weight per head channel (model/qwen3.h)
    KAMERA_TRY(r.tensor(p + "attn_q_norm.weight", {c.head_dim}, l.q_norm));
    KAMERA_TRY(r.tensor(p + "attn_k_norm.weight", {c.head_dim}, l.k_norm));
  }
  return r.weight(p + "attn_output.weight", {q, d}, l.wo);
}

// The FFN's norm, then its experts (a MoE layer) or the dense SwiGLU.
Status load_ffn(GgufModelReader& r, const GgufFile& f, const ModelConfig& c, int i,
                const std::string& p, LayerWeights& l) {
  const int64_t d = c.dim, h = c.ffn_dim;
  KAMERA_TRY(r.tensor(p + "ffn_norm.weight", {d}, l.ffn_norm));
  if (c.moe.is_moe_layer(i)) {
    auto read = [&r](const std::string& name, std::vector<int64_t> ne, Weight& dst) {
      return r.weight(name, std::move(ne), dst);
    };
    KAMERA_TRY(read_moe_layer(f, c, i, read, l.moe));
    if (c.moe.selection_bias)  // DeepSeek-V3's per-expert selection bias (model/moe.h)
      KAMERA_TRY(r.tensor(p + "exp_probs_b.bias", {c.moe.n_experts}, l.moe.exp_probs_b));
    return Status::Ok();
  }
  if (c.arch == Arch::Phi3) {  // one ffn_up of the gate rows then the up rows (model/phi3.h)
    KAMERA_ASSIGN_OR_RETURN(const GgufTensor* up, r.find(p + "ffn_up.weight", {d, 2 * h}, false));
    KAMERA_ASSIGN_OR_RETURN(auto parts, split_rows(*up, {h, h}));
    l.w_gate = std::move(parts[0]), l.w_up = std::move(parts[1]);
    return r.weight(p + "ffn_down.weight", {h, d}, l.w_down);
  }
  KAMERA_TRY(r.weight(p + "ffn_gate.weight", {d, h}, l.w_gate));
  KAMERA_TRY(r.weight(p + "ffn_down.weight", {h, d}, l.w_down));
  return r.weight(p + "ffn_up.weight", {d, h}, l.w_up);
}

Status load_qkv_bias(GgufModelReader& r, const ModelConfig& c, const std::string& p,
                     LayerWeights& l) {
  const int64_t q = c.q_width(), kv = c.kv_width();
  KAMERA_TRY(r.tensor(p + "attn_q.bias", {q}, l.bq));
  KAMERA_TRY(r.tensor(p + "attn_k.bias", {kv}, l.bk));
  return r.tensor(p + "attn_v.bias", {kv}, l.bv);
}

// gpt-oss (model/gpt_oss.h): q/k/v/o and its experts' matrices, then every f32 vector (biases,
// sinks, the FFN's norm under post_attention_norm).
Status load_gpt_oss_layer(GgufModelReader& r, const GgufFile& f, const ModelConfig& c, int i,
                          const std::string& p, LayerWeights& l) {
  const int64_t d = c.dim, q = c.q_width(), kv = c.kv_width();
  KAMERA_TRY(r.weight(p + "attn_q.weight", {d, q}, l.wq));
  KAMERA_TRY(r.weight(p + "attn_k.weight", {d, kv}, l.wk));
  KAMERA_TRY(r.weight(p + "attn_v.weight", {d, kv}, l.wv));
  KAMERA_TRY(r.weight(p + "attn_output.weight", {q, d}, l.wo));
  auto read = [&r](const std::string& name, std::vector<int64_t> ne, Weight& dst) {
    return r.weight(name, std::move(ne), dst);
  };
  KAMERA_TRY(read_moe_layer(f, c, i, read, l.moe));
  for (const GptOssVector& v : gpt_oss_layer_vectors(c, l))
    KAMERA_TRY(r.tensor(p + v.suffix, v.ne, *v.dst));
  return Status::Ok();
}

Status load_layer(GgufModelReader& r, const GgufFile& f, const ModelConfig& c, int i,
                  LayerWeights& l) {
  const std::string p = fmt::format("blk.{}.", i);
  KAMERA_TRY(r.tensor(p + "attn_norm.weight", {c.dim}, l.attn_norm));
  if (is_gpt_oss(c.arch)) return load_gpt_oss_layer(r, f, c, i, p, l);
  const bool mla = c.attention == AttentionKind::Mla;
  KAMERA_TRY(mla ? load_mla_attention(r, c, p, l) : load_attention(r, c, p, l));
  KAMERA_TRY(load_ffn(r, f, c, i, p, l));
  if (!mla && c.qkv_bias) KAMERA_TRY(load_qkv_bias(r, c, p, l));
  if (is_gemma3(c.arch)) {  // model/layer_kinds.h
    KAMERA_TRY(r.tensor(p + "post_attention_norm.weight", {c.dim}, l.attn_post_norm));
    KAMERA_TRY(r.tensor(p + "post_ffw_norm.weight", {c.dim}, l.ffn_post_norm));
  }
  return Status::Ok();
}

// phi3's LongRoPE factor sets (global tensors, n_rot / 2 values each, every one > 0).
Status load_longrope(GgufModelReader& r, const GgufFile& f, ModelConfig& c) {
  LongRope& lr = c.longrope;
  KAMERA_TRY(r.tensor("rope_factors_short.weight", {c.rope.n_pairs()}, lr.short_factors, true));
  KAMERA_TRY(r.tensor("rope_factors_long.weight", {c.rope.n_pairs()}, lr.long_factors, true));
  for (const auto* v : {&lr.short_factors, &lr.long_factors})
    for (float x : *v)
      if (!(x > 0))
        return make_error(ErrorCode::CorruptData, "{}: a rope factor is {} (must be > 0)", f.name(),
                          x);
  return Status::Ok();
}

Status load_weights(GgufModelReader& r, const GgufFile& f, Model& m) {
  KAMERA_TRY(load_head(r, m));
  KAMERA_TRY(accept_rerank_head(r, f, m.cfg));
  if (m.cfg.arch == Arch::Phi3) KAMERA_TRY(load_longrope(r, f, m.cfg));
  m.layers.resize(m.cfg.n_layers);
  for (int i = 0; i < m.cfg.n_layers; ++i) KAMERA_TRY(load_layer(r, f, m.cfg, i, m.layers[i]));
  return Status::Ok();
}

// A tensor no step read would be ignored, and the model would compute something else.
Status check_all_tensors_read(const GgufModelReader& r, const GgufFile& f) {
  for (const GgufTensor& t : f.tensors())
    if (!r.used().count(t.name))
      return make_error(ErrorCode::Unsupported,
                        "{}: tensor '{}' is not supported for architecture {} (kamera would "
                        "ignore it and compute something else)",
                        f.name(), t.name, r.arch());
  return Status::Ok();
}

// The embedded vocabulary, when the file has one; an unsupported one leaves the model on token
// ids (with a warning), a mismatched one is an error.
Status attach_tokenizer(const GgufFile& f, Model& m) {
  if (!f.get_string(gk::kTokenizerModel)) return Status::Ok();
  auto tok = tokenizer_from_gguf(f);
  if (!tok.ok() && tok.code() != ErrorCode::Unsupported) return tok.error();
  if (!tok.ok()) {
    log().warn("{}; the model runs on token ids only", tok.message());
  } else if (tok->n_vocab() != m.cfg.n_vocab) {
    return make_error(ErrorCode::CorruptData, "{}: tokenizer has {} tokens but the model {}",
                      f.name(), tok->n_vocab(), m.cfg.n_vocab);
  } else {
    m.tokenizer = std::move(tok.value());
  }
  return Status::Ok();
}

// The model as the file has it: config, weights pointing into the mapping, tokenizer. The parsed
// metadata (a copy of the vocabulary and its merges) goes with the file when this returns.
Result<std::unique_ptr<Model>> read_gguf_model(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file.ok()) return file.error();
  const GgufFile& f = **file;
  std::string arch;
  KAMERA_ASSIGN_OR_RETURN(const Arch kind, read_arch(f, &arch));
  GgufModelReader r(f, arch);
  auto m = std::make_unique<Model>();
  m->cfg.arch = kind;
  KAMERA_TRY(read_config(r, f, m->cfg));
  KAMERA_TRY(load_weights(r, f, *m));
  KAMERA_TRY(check_all_tensors_read(r, f));
  KAMERA_TRY(attach_tokenizer(f, *m));
  m->source = path;
  m->format = "gguf";
  m->mapping = f.mapping();  // the weights point into it
  return m;
}

}  // namespace

Result<std::unique_ptr<Model>> load_gguf_model(const std::string& path, int64_t n_ctx,
                                               Numerics numerics) {
  KAMERA_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, read_gguf_model(path));
  select_rope_context(m->cfg, n_ctx);
  malloc_trim(0);  // the freed metadata's pages go back before the repacked weights are written
  m->set_numerics(numerics);
  m->fingerprint = compute_fingerprint(*m);
  repack_for_decode(*m);
  return m;
}

}  // namespace kamera
