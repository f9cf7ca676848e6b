// Models from GGUF files with llama.cpp's key and tensor names (architectures llama, qwen2,
// qwen2vl, deepseek2). Weight matrices stay in the file's type and point into its mapping.
#include <set>

#include "core/log.h"
#include "gguf/gguf.h"
#include "model/deepseek2.h"
#include "model/model.h"
#include "tokenizer/gguf_import.h"

namespace kamera {

namespace {

class GgufModelReader {
 public:
  GgufModelReader(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  Result<int64_t> need_int(const std::string& key) const {
    auto v = f_.get_int(arch_ + "." + key);
    if (!v)
      return make_error(ErrorCode::CorruptData, "{}: missing metadata key '{}.{}'", f_.name(),
                        arch_, key);
    return *v;
  }
  int64_t int_or(const std::string& key, int64_t dflt) const {
    return f_.get_int(arch_ + "." + key).value_or(dflt);
  }
  double float_or(const std::string& key, double dflt) const {
    return f_.get_float(arch_ + "." + key).value_or(dflt);
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

}  // namespace

Result<std::unique_ptr<Model>> load_gguf_model(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file.ok()) return file.error();
  const GgufFile& f = **file;
  const auto arch = f.get_string("general.architecture");
  if (!arch) return make_error(ErrorCode::CorruptData, "{}: missing general.architecture", path);
  const std::optional<Arch> kind = arch_from_name(*arch);
  if (!kind)
    return make_error(ErrorCode::Unsupported,
                      "{}: architecture '{}' is not supported (supported: {})", path, *arch,
                      arch_names());
  const bool mla = *kind == Arch::Deepseek2;
  const bool qwen = is_qwen(*kind);
  GgufModelReader r(f, *arch);

  auto m = std::make_unique<Model>();
  ModelConfig& c = m->cfg;
  c.arch = *kind;
  auto get = [&](const char* key, int& out) -> Status {
    auto v = r.need_int(key);
    if (!v.ok()) return v.error();
    if (*v <= 0 || *v > INT32_MAX)
      return make_error(ErrorCode::CorruptData, "{}: {}.{} = {} is out of range", path, *arch, key,
                        *v);
    out = int(*v);
    return Status::Ok();
  };
  KAMERA_TRY(get("embedding_length", c.dim));
  KAMERA_TRY(get("block_count", c.n_layers));
  KAMERA_TRY(get("feed_forward_length", c.ffn_dim));
  KAMERA_TRY(get("attention.head_count", c.n_heads));
  KAMERA_TRY(get("context_length", c.ctx_len));
  c.n_kv_heads = int(r.int_or("attention.head_count_kv", c.n_heads));
  c.head_dim = int(r.int_or("attention.key_length", c.n_heads > 0 ? c.dim / c.n_heads : 0));
  if (!mla && r.int_or("attention.value_length", c.head_dim) != c.head_dim)
    return make_error(ErrorCode::Unsupported, "{}: key_length != value_length is not supported",
                      path);
  c.rms_eps = float(r.float_or("attention.layer_norm_rms_epsilon", 1e-5));
  c.rope.layout = qwen ? RopeLayout::Neox : RopeLayout::Normal;
  c.rope.head_dim = c.head_dim;
  c.rope.n_rot = int(r.int_or("rope.dimension_count", c.head_dim));
  if (mla) {
    // DeepSeek-V2 MLA: key_length = qk_nope + qk_rope, value_length = v_head,
    // rope.dimension_count = qk_rope.
    c.attention = AttentionKind::Mla;
    c.mla.q_lora_rank = int(r.int_or("attention.q_lora_rank", 0));
    c.mla.kv_lora_rank = int(r.int_or("attention.kv_lora_rank", 0));
    c.mla.qk_rope_dim = c.rope.n_rot;
    c.mla.qk_nope_dim = c.head_dim - c.rope.n_rot;
    c.mla.v_head_dim = int(r.int_or("attention.value_length", 0));
    c.rope.head_dim = c.rope.n_rot;
    KAMERA_TRY(read_deepseek2_hparams(f, c));  // MoE layers, YaRN (model/deepseek2.h)
  }
  if (*kind == Arch::Qwen2Vl) {
    const auto* sec = f.get_int_array("qwen2vl.rope.dimension_sections");
    if (!sec || sec->size() < 3 || sec->size() > 4)
      return make_error(ErrorCode::CorruptData,
                        "{}: qwen2vl.rope.dimension_sections must be an array of 3 or 4 integers",
                        path);
    for (size_t i = 0; i < sec->size(); ++i) {
      if ((*sec)[i] < 0 || (*sec)[i] > 1 << 16)
        return make_error(ErrorCode::CorruptData, "{}: rope section {} = {} is out of range", path,
                          i, (*sec)[i]);
      c.rope.sections[i] = int((*sec)[i]);
    }
    c.rope.mrope = f.get_bool("qwen2vl.rope.mrope_interleaved").value_or(false)
                       ? MropeMode::Interleaved
                       : MropeMode::Blocked;
  }
  c.rope.theta = r.float_or("rope.freq_base", 10000.0);
  const auto scaling = f.get_string(*arch + ".rope.scaling.type");
  if (scaling && *scaling == "linear") {
    const double factor = r.float_or("rope.scaling.factor", 1.0);
    if (!(factor > 0))
      return make_error(ErrorCode::CorruptData, "{}: rope.scaling.factor {} must be > 0", path,
                        factor);
    c.rope.freq_scale = 1.0 / factor;
  } else if (scaling && *scaling != "none" && !mla) {  // deepseek2: read above
    return make_error(ErrorCode::Unsupported,
                      "{}: rope scaling '{}' is not supported (none, linear)", path, *scaling);
  }
  const GgufTensor* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->ne.size() != 2)
    return make_error(ErrorCode::CorruptData, "{}: missing 2-D tensor 'token_embd.weight'", path);
  c.n_vocab = int(r.int_or("vocab_size", embd->ne[1]));
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  c.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  KAMERA_TRY(c.validate(path));

  const int64_t d = c.dim, q = c.q_width(), kv = c.kv_width(), h = c.ffn_dim, V = c.n_vocab;
  KAMERA_TRY(r.weight("token_embd.weight", {d, V}, m->tok_embd));
  KAMERA_TRY(r.tensor("output_norm.weight", {d}, m->out_norm));
  if (!c.tied_output) {
    KAMERA_TRY(r.weight("output.weight", {d, V}, m->output));
    if (m->output.same_as(m->tok_embd)) {  // a stored copy of the embedding: same model as tied
      m->output = Weight();
      c.tied_output = true;
    }
  }
  m->layers.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) {
    LayerWeights& l = m->layers[i];
    const std::string p = fmt::format("blk.{}.", i);
    KAMERA_TRY(r.tensor(p + "attn_norm.weight", {d}, l.attn_norm));
    if (mla) {
      const MlaConfig& a = c.mla;
      const int64_t lat = a.kv_lora_rank, rope = a.qk_rope_dim, H = c.n_heads;
      if (a.q_lora_rank > 0) {
        KAMERA_TRY(r.weight(p + "attn_q_a.weight", {d, a.q_lora_rank}, l.wq_a));
        KAMERA_TRY(r.tensor(p + "attn_q_a_norm.weight", {a.q_lora_rank}, l.q_a_norm));
        KAMERA_TRY(r.weight(p + "attn_q_b.weight", {a.q_lora_rank, q}, l.wq_b));
      } else {
        KAMERA_TRY(r.weight(p + "attn_q.weight", {d, q}, l.wq));
      }
      KAMERA_TRY(r.weight(p + "attn_kv_a_mqa.weight", {d, lat + rope}, l.wkv_a));
      KAMERA_TRY(r.tensor(p + "attn_kv_a_norm.weight", {lat}, l.kv_a_norm));
      KAMERA_TRY(
          r.weight_f32(p + "attn_kv_b.weight", {lat, H * (a.qk_nope_dim + a.v_head_dim)}, l.wkv_b));
      KAMERA_TRY(r.weight(p + "attn_output.weight", {H * a.v_head_dim, d}, l.wo));
      KAMERA_TRY(r.tensor(p + "ffn_norm.weight", {d}, l.ffn_norm));
      if (c.moe.is_moe_layer(i)) {
        auto read = [&r](const std::string& name, std::vector<int64_t> ne, Weight& dst) {
          return r.weight(name, std::move(ne), dst);
        };
        KAMERA_TRY(read_moe_layer(f, c, i, read, l.moe));
        continue;
      }
      KAMERA_TRY(r.weight(p + "ffn_gate.weight", {d, h}, l.w_gate));
      KAMERA_TRY(r.weight(p + "ffn_down.weight", {h, d}, l.w_down));
      KAMERA_TRY(r.weight(p + "ffn_up.weight", {d, h}, l.w_up));
      continue;
    }
    KAMERA_TRY(r.weight(p + "attn_q.weight", {d, q}, l.wq));
    KAMERA_TRY(r.weight(p + "attn_k.weight", {d, kv}, l.wk));
    KAMERA_TRY(r.weight(p + "attn_v.weight", {d, kv}, l.wv));
    KAMERA_TRY(r.weight(p + "attn_output.weight", {q, d}, l.wo));
    KAMERA_TRY(r.tensor(p + "ffn_norm.weight", {d}, l.ffn_norm));
    KAMERA_TRY(r.weight(p + "ffn_gate.weight", {d, h}, l.w_gate));
    KAMERA_TRY(r.weight(p + "ffn_down.weight", {h, d}, l.w_down));
    KAMERA_TRY(r.weight(p + "ffn_up.weight", {d, h}, l.w_up));
    if (c.qkv_bias) {
      KAMERA_TRY(r.tensor(p + "attn_q.bias", {q}, l.bq));
      KAMERA_TRY(r.tensor(p + "attn_k.bias", {kv}, l.bk));
      KAMERA_TRY(r.tensor(p + "attn_v.bias", {kv}, l.bv));
    }
  }
  for (const GgufTensor& t : f.tensors())
    if (!r.used().count(t.name))
      return make_error(ErrorCode::Unsupported,
                        "{}: tensor '{}' is not supported for architecture {} (kamera would "
                        "ignore it and compute something else)",
                        path, t.name, *arch);

  if (f.get_string("tokenizer.ggml.model")) {
    auto tok = tokenizer_from_gguf(f);
    if (!tok.ok() && tok.code() != ErrorCode::Unsupported) return tok.error();
    if (!tok.ok()) {
      log().warn("{}; the model runs on token ids only", tok.message());
    } else if (tok->n_vocab() != c.n_vocab) {
      return make_error(ErrorCode::CorruptData, "{}: tokenizer has {} tokens but the model {}",
                        path, tok->n_vocab(), c.n_vocab);
    } else {
      m->tokenizer = std::move(tok.value());
    }
  }
  m->source = path;
  m->format = "gguf";
  m->mapping = *file;  // the weights point into it
  m->fingerprint = compute_fingerprint(*m);
  return m;
}

}  // namespace kamera
