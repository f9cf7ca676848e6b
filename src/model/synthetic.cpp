#include "model/synthetic.h"

#include <xxhash.h>

#include <charconv>
#include <cmath>
#include <sstream>

#include "model/gguf.h"
#include "model/synthetic_corpus.h"
#include "model/tokenizer.h"

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

std::vector<std::string> synthetic_preset_names() {
  return {"tiny", "0.5b"};
}

std::optional<ModelConfig> synthetic_preset(const std::string& arch, const std::string& preset) {
  if (arch != "llama" && arch != "qwen2") return std::nullopt;
  ModelConfig c;
  c.arch = arch;
  if (preset == "tiny") {
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 16;
    c.ffn_dim = 128;
    c.n_vocab = 512;
    c.ctx_len = 1024;
    c.rope.theta = 10000.0;
    c.rms_eps = 1e-5f;
  } else if (preset == "0.5b") {
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
  } else {
    return std::nullopt;
  }
  c.qkv_bias = arch == "qwen2";
  c.tied_output = true;
  c.rope.layout = arch == "qwen2" ? RopeLayout::Neox : RopeLayout::Normal;
  c.rope.head_dim = c.head_dim;
  c.rope.n_rot = c.head_dim;
  return c;
}

Status apply_dims(ModelConfig& c, const std::string& dims) {
  std::stringstream ss(dims);
  std::string item;
  const bool rot_follows_head = c.rope.n_rot == c.head_dim;
  bool rot_set = false;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) return make_error("--dims: '{}' is not key=value", item);
    const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    double x = 0;
    auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), x);
    if (ec != std::errc() || p != val.data() + val.size())
      return make_error("--dims: '{}' is not a number in '{}'", val, item);
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
      rot_set = true;
    } else if (key == "theta")
      c.rope.theta = x;
    else if (key == "eps")
      c.rms_eps = float(x);
    else if (key == "bias")
      c.qkv_bias = i != 0;
    else if (key == "tied")
      c.tied_output = i != 0;
    else
      return make_error(
          "--dims: unknown key '{}' (dim, layers, heads, kv_heads, head_dim, ffn, "
          "vocab, ctx, rope_dims, theta, eps, bias, tied)",
          key);
  }
  c.rope.head_dim = c.head_dim;
  if (rot_follows_head && !rot_set) c.rope.n_rot = c.head_dim;
  return c.validate("--dims");
}

std::vector<std::string> llama_cpp_incompatibilities(const ModelConfig& c) {
  std::vector<std::string> out;
  if (c.rope.n_rot != c.head_dim)
    out.push_back(
        "partial rotary (rope_dims < head_dim): llama.cpp's llama/qwen2 loaders require "
        "rope.dimension_count == head_dim");
  if (c.arch == "qwen2" && !c.qkv_bias)
    out.push_back("qwen2 without attn_q/k/v biases: llama.cpp requires them for this architecture");
  if (c.arch == "qwen2" && c.head_dim * c.n_heads != c.dim)
    out.push_back(
        "qwen2 with head_dim * heads != dim: llama.cpp expects attn_q of shape {dim, dim}");
  return out;
}

Status write_synthetic_gguf(const SyntheticSpec& spec, const std::string& path) {
  const ModelConfig& c = spec.cfg;
  KAMERA_TRY(c.validate(path));
  if (c.arch != "llama" && c.arch != "qwen2")
    return make_error("make-model: architecture '{}' is not supported (llama, qwen2)", c.arch);
  if (c.arch == "qwen2" && c.rope.layout != RopeLayout::Neox)
    return make_error("make-model: qwen2 uses the NeoX rope layout");
  if (c.arch == "llama" && c.rope.layout != RopeLayout::Normal)
    return make_error("make-model: llama uses the normal (interleaved pair) rope layout");
  auto vocab = build_synthetic_vocab(c.n_vocab, synthetic_vocab_corpus());
  if (!vocab.ok()) return make_error("make-model: vocabulary: {}", vocab.message());

  GgufWriter w;
  const std::string a = c.arch;
  w.set_string("general.architecture", a);
  w.set_string("general.name", spec.name);
  const uint32_t file_type = spec.weight_type == DType::F32    ? 0
                             : spec.weight_type == DType::F16  ? 1
                             : spec.weight_type == DType::Q8_0 ? 7
                                                               : 32;
  w.set_u32("general.file_type", file_type);
  w.set_u32(a + ".context_length", uint32_t(c.ctx_len));
  w.set_u32(a + ".embedding_length", uint32_t(c.dim));
  w.set_u32(a + ".block_count", uint32_t(c.n_layers));
  w.set_u32(a + ".feed_forward_length", uint32_t(c.ffn_dim));
  w.set_u32(a + ".attention.head_count", uint32_t(c.n_heads));
  w.set_u32(a + ".attention.head_count_kv", uint32_t(c.n_kv_heads));
  if (c.head_dim * c.n_heads != c.dim) {
    w.set_u32(a + ".attention.key_length", uint32_t(c.head_dim));
    w.set_u32(a + ".attention.value_length", uint32_t(c.head_dim));
  }
  w.set_u32(a + ".rope.dimension_count", uint32_t(c.rope.n_rot));
  w.set_f32(a + ".rope.freq_base", float(c.rope.theta));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", c.rms_eps);
  w.set_u32(a + ".vocab_size", uint32_t(c.n_vocab));

  const Tokenizer::Vocab& v = *vocab;
  std::vector<int32_t> types;
  for (TokenType t : v.types) types.push_back(int32_t(t));
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", v.pieces);
  w.set_f32_array("tokenizer.ggml.scores", v.scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", uint32_t(v.bos));
  w.set_u32("tokenizer.ggml.eos_token_id", uint32_t(v.eos));
  w.set_u32("tokenizer.ggml.unknown_token_id", uint32_t(v.unk));
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);

  const uint64_t seed = spec.seed;
  const int64_t d = c.dim, q = c.q_width(), kv = c.kv_width(), h = c.ffn_dim, V = c.n_vocab;
  const DType wt = spec.weight_type;
  auto weight = [&](const std::string& name, int64_t in, int64_t out) {
    // Uniform with the variance of N(0, 1/in): activations keep unit scale through the layers.
    w.add_tensor(name, {in, out}, wt, [=](float* dst) {
      fill_uniform(dst, in * out, seed, name, 1.0f / std::sqrt(float(in)));
    });
  };
  auto norm = [&](const std::string& name, int64_t n) {
    w.add_tensor(name, {n}, DType::F32, [=](float* dst) { fill_norm(dst, n, seed, name); });
  };
  auto bias = [&](const std::string& name, int64_t n) {
    w.add_tensor(name, {n}, DType::F32,
                 [=](float* dst) { fill_uniform(dst, n, seed, name, 0.1f); });
  };
  w.add_tensor("token_embd.weight", {d, V}, wt, [=](float* dst) {
    fill_uniform(dst, d * V, seed, "token_embd.weight", 1.0f / std::sqrt(float(d)));
  });
  norm("output_norm.weight", d);
  if (!c.tied_output) weight("output.weight", d, V);
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    norm(p + "attn_norm.weight", d);
    weight(p + "attn_q.weight", d, q);
    weight(p + "attn_k.weight", d, kv);
    weight(p + "attn_v.weight", d, kv);
    if (c.qkv_bias) {
      bias(p + "attn_q.bias", q);
      bias(p + "attn_k.bias", kv);
      bias(p + "attn_v.bias", kv);
    }
    weight(p + "attn_output.weight", q, d);
    norm(p + "ffn_norm.weight", d);
    weight(p + "ffn_gate.weight", d, h);
    weight(p + "ffn_up.weight", d, h);
    weight(p + "ffn_down.weight", h, d);
  }
  return w.write(path);
}

}  // namespace kamera
