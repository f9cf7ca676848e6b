// Qwen2-VL / Qwen2.5-VL / Qwen3-VL vision tower: config, presets, random weights, derived tensors.
#include "vision/qwen_vision.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "ops/gemm.h"
#include "ops/quant.h"

namespace kamera {

bool QwenVisionConfig::full_attention(int layer) const {
  if (variant != QwenVisionVariant::Qwen25VL) return true;
  return std::find(full_attention_layers.begin(), full_attention_layers.end(), layer) !=
         full_attention_layers.end();
}

Status QwenVisionConfig::validate() const {
  auto bad = [](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "qwen vision: {}", what);
  };
  if (patch < 1 || patch > 64 || merge < 1 || merge > 8 || temporal_patch != 2)
    return bad(fmt::format("patch {}, merge {}, temporal patch {} (need temporal patch 2)", patch,
                           merge, temporal_patch));
  if (dim < 4 || dim > 16384 || n_heads < 1 || dim % n_heads != 0 || head_dim() % 4 != 0)
    return bad(fmt::format("width {} with {} heads: heads must divide it into a multiple of 4", dim,
                           n_heads));
  if (n_layers < 0 || n_layers > 256 || ffn_dim < 1 || ffn_dim > 65536 || out_dim < 1 ||
      out_dim > 65536)
    return bad(fmt::format("layers {}, ffn {}, out {}", n_layers, ffn_dim, out_dim));
  if (!(eps > 0.0f) || !(rope_theta > 0.0)) return bad("epsilon and rope theta must be positive");
  if (variant == QwenVisionVariant::Qwen25VL) {
    if (act != QwenVisionAct::SiluGated) return bad("Qwen2.5-VL blocks use a gated SiLU FFN");
    if (window < patch * merge || window % (patch * merge) != 0)
      return bad(
          fmt::format("window {} is not a multiple of patch x merge = {}", window, patch * merge));
    for (int l : full_attention_layers)
      if (l < 0 || l >= n_layers)
        return bad(fmt::format("full-attention layer {} is not one of {} layers", l, n_layers));
  } else if (act == QwenVisionAct::SiluGated) {
    return bad("Qwen2-VL blocks have no gated FFN");
  }
  if (qwen3() != (act == QwenVisionAct::GeluTanh))
    return bad("the tanh GELU FFN is Qwen3-VL's, and Qwen3-VL's FFN is the tanh GELU");
  if (!qwen3() && (n_pos_embd != 0 || !deepstack_layers.empty()))
    return bad("a position table and deepstack layers are Qwen3-VL's");
  if (qwen3() &&
      (n_pos_embd < 1 || n_pos_embd > (1 << 20) || pos_side() * pos_side() != n_pos_embd))
    return bad(fmt::format("{} position rows are not a square table", n_pos_embd));
  for (size_t i = 0; i < deepstack_layers.size(); ++i)
    if (deepstack_layers[i] < 0 || deepstack_layers[i] >= n_layers ||
        (i > 0 && deepstack_layers[i] <= deepstack_layers[i - 1]))
      return bad(fmt::format("deepstack layer {} (need ascending layers of {})",
                             deepstack_layers[i], n_layers));
  if (min_pixels < 1 || max_pixels < min_pixels)
    return bad(fmt::format("pixel range [{}, {}]", min_pixels, max_pixels));
  for (int c = 0; c < 3; ++c)
    if (!(image_std[size_t(c)] > 0.0f)) return bad("image std must be positive");
  return Status::Ok();
}

int QwenVisionConfig::pos_side() const {
  int s = int(std::lround(std::sqrt(double(n_pos_embd))));
  return s;
}

namespace {

std::optional<QwenVisionConfig> qwen3_vision_preset(const std::string& preset) {
  QwenVisionConfig c;
  c.variant = QwenVisionVariant::Qwen3VL;
  c.act = QwenVisionAct::GeluTanh;
  c.patch = 16;
  c.patch_bias = true;
  c.image_mean = kHalf;
  c.image_std = kHalf;
  c.min_pixels = kQwen3VlMinPixels;
  c.max_pixels = kQwen3VlMaxPixels;
  c.n_heads = 16;
  c.out_dim = 2048;
  c.n_pos_embd = 48 * 48;
  if (preset == "tiny") {
    c.dim = 64;
    c.n_layers = 3;
    c.n_heads = 4;
    c.ffn_dim = 128;
    c.out_dim = 64;
    c.n_pos_embd = 16;
    c.deepstack_layers = {0, 1};
  } else if (preset == "2b") {  // Qwen3-VL-2B-Instruct's vision_config
    c.dim = 1024;
    c.n_layers = 24;
    c.ffn_dim = 4096;
    c.deepstack_layers = {5, 11, 17};
  } else if (preset == "30b-a3b") {  // Qwen3-VL-30B-A3B-Instruct's vision_config
    c.dim = 1152;
    c.n_layers = 27;
    c.ffn_dim = 4304;
    c.deepstack_layers = {8, 16, 24};
  } else {
    return std::nullopt;
  }
  return c;
}

}  // namespace

std::optional<QwenVisionConfig> qwen_vision_preset(const std::string& arch,
                                                   const std::string& preset) {
  QwenVisionConfig c;
  if (arch == "qwen3vl") return qwen3_vision_preset(preset);
  if (arch == "qwen2vl") {
    c.variant = QwenVisionVariant::Qwen2VL;
    c.act = QwenVisionAct::QuickGelu;
  } else if (arch == "qwen25vl") {
    c.variant = QwenVisionVariant::Qwen25VL;
    c.act = QwenVisionAct::SiluGated;
  } else {
    return std::nullopt;
  }
  const bool v25 = c.variant == QwenVisionVariant::Qwen25VL;
  if (preset == "tiny") {
    c.dim = 64;
    c.n_layers = v25 ? 4 : 2;
    c.n_heads = 4;
    c.ffn_dim = v25 ? 96 : 128;
    c.out_dim = 64;
    if (v25) c.full_attention_layers = {1, 3};
  } else if (preset == "2b" && !v25) {  // Qwen2-VL-2B-Instruct's tower
    c.dim = 1280;
    c.n_layers = 32;
    c.n_heads = 16;
    c.ffn_dim = 5120;
    c.out_dim = 1536;
  } else if (preset == "3b" && v25) {  // Qwen2.5-VL-3B-Instruct's tower
    c.dim = 1280;
    c.n_layers = 32;
    c.n_heads = 16;
    c.ffn_dim = 3420;
    c.out_dim = 2048;
    c.full_attention_layers = {7, 15, 23, 31};
  } else {
    return std::nullopt;
  }
  return c;
}

Status check_qwen_pair(const QwenVisionConfig& t, const ModelConfig& d, const std::string& name) {
  const char* want = t.qwen3() ? "qwen3vl or qwen3vlmoe" : "qwen2vl";
  if (!is_mrope(d.arch) || t.qwen3() != is_qwen3vl(d.arch))
    return make_error(ErrorCode::InvalidArgument,
                      "images from {} need a {} (M-RoPE) decoder; this one is '{}'", name, want,
                      arch_name(d.arch));
  if (t.out_dim != d.dim)
    return make_error(ErrorCode::InvalidArgument,
                      "{} projects images to width {}, but the decoder is {} wide (not a pair)",
                      name, t.out_dim, d.dim);
  if (int(t.deepstack_layers.size()) != d.n_deepstack)
    return make_error(ErrorCode::InvalidArgument,
                      "{} gives {} deepstack slices per image row, but the decoder reads {} (not a "
                      "pair)",
                      name, t.deepstack_layers.size(), d.n_deepstack);
  return Status::Ok();
}

void QwenLinear::apply(const float* x, int n, float* y, ThreadPool* pool) const {
  const float* bias = b.empty() ? nullptr : b.data();
  if (w.is_f32()) {  // what linear() does for F32, without a pool
    matmul_wt(x, w.f32(), bias, y, n, in, out);
    return;
  }
  if (pool == nullptr) {
    thread_local ThreadPool single(1);
    pool = &single;
  }
  if (w.type() == GgmlType::F16 || w.type() == GgmlType::BF16) {
    // f32 panels on prefill too: bf16 panels round the activations to 8 bits of mantissa, 8x
    // coarser than the f16 activations llama.cpp's clip multiplies F16 weights with (the
    // F16 tower would drift from it past 1e-3: QwenVisionLlamaCpp.EmbeddingsMatchLlamaCppClip)
    const quant::QuantKernels& f32_panels = quant::decode_kernels();
    quant::matmul_with(f32_panels, f32_panels, w.view(), x, n, bias, y, *pool);
    return;
  }
  linear(w, x, n, bias, y, *pool);
}

namespace {

struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float symmetric() { return float(next() >> 40) * (2.0f / 16777216.0f) - 1.0f; }  // [-1, 1)
};

// Weights uniform with standard deviation 1/sqrt(in); norms 1 +- 0.1; biases +- 0.05.
void fill(std::vector<float>& v, size_t n, uint64_t seed, const std::string& name, int fan_in,
          char kind) {
  SplitMix rng{seed ^ XXH3_64bits(name.data(), name.size())};
  v.resize(n);
  const float a = std::sqrt(3.0f / float(std::max(fan_in, 1)));
  for (float& x : v) {
    const float u = rng.symmetric();
    x = kind == 'n' ? 1.0f + 0.1f * u : kind == 'b' ? 0.05f * u : a * u;
  }
}

void fill_linear(QwenLinear& l, int in, int out, bool bias, uint64_t seed,
                 const std::string& name) {
  l.in = in;
  l.out = out;
  std::vector<float> v;
  fill(v, size_t(in) * out, seed, name + ".weight", in, 'w');
  l.w = Weight::from_f32(std::move(v), out, in);
  if (bias)
    fill(l.b, size_t(out), seed, name + ".bias", in, 'b');
  else
    l.b.clear();
}

}  // namespace

QwenVisionModel QwenVisionModel::random(const QwenVisionConfig& cfg, uint64_t seed) {
  QwenVisionModel m;
  m.cfg = cfg;
  m.source = fmt::format("random(seed {})", seed);
  const int d = cfg.dim, f = cfg.ffn_dim, kp = 3 * cfg.patch * cfg.patch;
  const bool rms = cfg.rms_norm();
  QwenVisionWeights& w = m.w;
  // Both frames of the Conv3d see the same image: scale so their sum has unit-ish variance.
  fill(w.patch0, size_t(d) * kp, seed, "v.patch_embd.weight", 2 * kp, 'w');
  fill(w.patch1, size_t(d) * kp, seed, "v.patch_embd.weight.1", 2 * kp, 'w');
  if (cfg.patch_bias) fill(w.patch_b, size_t(d), seed, "v.patch_embd.bias", 1, 'b');
  if (cfg.n_pos_embd > 0)  // unit-ish scale, as the patch embedding's
    fill(w.pos_embd, size_t(cfg.n_pos_embd) * d, seed, "v.position_embd.weight", 3, 'w');
  w.layers.resize(size_t(cfg.n_layers));
  for (int i = 0; i < cfg.n_layers; ++i) {
    auto& L = w.layers[size_t(i)];
    const std::string p = fmt::format("v.blk.{}.", i);
    fill(L.ln1_w, size_t(d), seed, p + "ln1.weight", 1, 'n');
    fill(L.ln2_w, size_t(d), seed, p + "ln2.weight", 1, 'n');
    if (!rms) {
      fill(L.ln1_b, size_t(d), seed, p + "ln1.bias", 1, 'b');
      fill(L.ln2_b, size_t(d), seed, p + "ln2.bias", 1, 'b');
    }
    fill_linear(L.q, d, d, true, seed, p + "attn_q");
    fill_linear(L.k, d, d, true, seed, p + "attn_k");
    fill_linear(L.v, d, d, true, seed, p + "attn_v");
    fill_linear(L.o, d, d, true, seed, p + "attn_out");
    if (cfg.act == QwenVisionAct::SiluGated) fill_linear(L.gate, d, f, true, seed, p + "ffn_gate");
    fill_linear(L.up, d, f, true, seed, p + "ffn_up");
    fill_linear(L.down, f, d, true, seed, p + "ffn_down");
  }
  const int mw = cfg.merged_width();
  for (int l : cfg.deepstack_layers) {
    QwenVisionWeights::Deepstack& ds = w.deepstack.emplace_back();
    const std::string p = fmt::format("v.deepstack.{}.", l);
    fill(ds.norm_w, size_t(mw), seed, p + "norm.weight", 1, 'n');
    fill(ds.norm_b, size_t(mw), seed, p + "norm.bias", 1, 'b');
    fill_linear(ds.fc1, mw, mw, true, seed, p + "fc1");
    fill_linear(ds.fc2, mw, cfg.out_dim, true, seed, p + "fc2");
  }
  fill(w.post_ln_w, size_t(d), seed, "v.post_ln.weight", 1, 'n');
  if (!rms) fill(w.post_ln_b, size_t(d), seed, "v.post_ln.bias", 1, 'b');
  fill_linear(w.mm0, cfg.merged_width(), cfg.merged_width(), true, seed, "mm.0");
  fill_linear(w.mm2, cfg.merged_width(), cfg.out_dim, true, seed, "mm.2");
  m.finish();
  return m;
}

void QwenVisionModel::finish() {
  const int d = cfg.dim, p = cfg.patch, kp = 3 * p * p;
  // Conv3d weight [dim][c][frame][py][px] from the two per-frame kernels [dim][c][py][px].
  w.patch.in = cfg.patch_values();
  w.patch.out = d;
  std::vector<float> pw(size_t(d) * w.patch.in, 0.0f);
  w.patch.b = w.patch_b;
  for (int o = 0; o < d; ++o)
    for (int c = 0; c < 3; ++c)
      for (int fr = 0; fr < 2; ++fr) {
        const std::vector<float>& src = fr == 0 ? w.patch0 : w.patch1;
        const float* s = src.data() + size_t(o) * kp + size_t(c) * p * p;
        float* dst = pw.data() + size_t(o) * w.patch.in + size_t(c * 2 + fr) * p * p;
        std::copy(s, s + p * p, dst);
      }
  w.patch.w = Weight::from_f32(std::move(pw), d, w.patch.in);
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  const int ints[] = {int(cfg.variant), cfg.patch,    cfg.temporal_patch, cfg.merge,
                      cfg.dim,          cfg.n_layers, cfg.n_heads,        cfg.ffn_dim,
                      cfg.out_dim,      int(cfg.act), cfg.window};
  const double reals[] = {cfg.eps,           cfg.rope_theta,   cfg.image_mean[0], cfg.image_mean[1],
                          cfg.image_mean[2], cfg.image_std[0], cfg.image_std[1],  cfg.image_std[2]};
  XXH3_128bits_update(st, ints, sizeof(ints));
  XXH3_128bits_update(st, reals, sizeof(reals));
  XXH3_128bits_update(st, cfg.full_attention_layers.data(),
                      cfg.full_attention_layers.size() * sizeof(int));
  if (cfg.qwen3()) {  // Qwen2-VL family fingerprints stay as they were
    const int n_ds = int(cfg.deepstack_layers.size());
    XXH3_128bits_update(st, &n_ds, sizeof(n_ds));
    XXH3_128bits_update(st, cfg.deepstack_layers.data(), cfg.deepstack_layers.size() * sizeof(int));
  }
  auto add = [&](const std::vector<float>& v) {
    const uint64_t n = v.size();
    XXH3_128bits_update(st, &n, sizeof(n));
    XXH3_128bits_update(st, v.data(), v.size() * sizeof(float));
  };
  // an F32 matrix hashes as the f32 values it was once held as; another type adds its type id
  // and hashes its raw bytes (as model.cpp's fingerprint does)
  auto add_w = [&](const Weight& m) {
    const uint64_t n = uint64_t(m.rows() * m.cols());
    XXH3_128bits_update(st, &n, sizeof(n));
    if (!m.is_f32()) {
      const uint32_t type = uint32_t(m.type());
      XXH3_128bits_update(st, &type, sizeof(type));
    }
    if (m.bytes() > 0) XXH3_128bits_update(st, m.raw(), m.bytes());
  };
  add_w(w.patch.w);
  add(w.patch_b);
  for (const auto& L : w.layers) {
    for (const auto* v : {&L.ln1_w, &L.ln1_b, &L.ln2_w, &L.ln2_b}) add(*v);
    for (const QwenLinear* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) {
      add_w(l->w);
      add(l->b);
    }
  }
  if (cfg.qwen3()) add(w.pos_embd);
  for (const auto& ds : w.deepstack) {
    add(ds.norm_w);
    add(ds.norm_b);
    for (const QwenLinear* l : {&ds.fc1, &ds.fc2}) {
      add_w(l->w);
      add(l->b);
    }
  }
  add(w.post_ln_w);
  add(w.post_ln_b);
  for (const QwenLinear* l : {&w.mm0, &w.mm2}) {
    add_w(l->w);
    add(l->b);
  }
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  fingerprint = {h.high64, h.low64};
}

Status QwenVisionModel::check_shapes() const {
  KAMERA_TRY(cfg.validate());
  const size_t d = size_t(cfg.dim), f = size_t(cfg.ffn_dim), kp = size_t(3 * cfg.patch * cfg.patch);
  auto need = [](const char* what, size_t have, size_t want) -> Status {
    if (have != want)
      return make_error(ErrorCode::InvalidArgument,
                        "qwen vision: {} has {} values, the config implies {}", what, have, want);
    return Status::Ok();
  };
  auto lin = [&](const char* what, const QwenLinear& l, size_t in, size_t out) -> Status {
    KAMERA_TRY(need(what, size_t(l.w.rows() * l.w.cols()), in * out));
    if (!l.w.empty() && (size_t(l.w.rows()) != out || size_t(l.w.cols()) != in))
      return make_error(ErrorCode::InvalidArgument, "qwen vision: {} holds {} x {}, want {} x {}",
                        what, l.w.rows(), l.w.cols(), out, in);
    if (size_t(l.in) != in || size_t(l.out) != out)
      return make_error(ErrorCode::InvalidArgument, "qwen vision: {} is {} -> {}, want {} -> {}",
                        what, l.in, l.out, in, out);
    if (!l.b.empty()) KAMERA_TRY(need(what, l.b.size(), out));
    return Status::Ok();
  };
  KAMERA_TRY(need("the patch kernel", w.patch0.size(), d * kp));
  KAMERA_TRY(need("the second patch kernel", w.patch1.size(), d * kp));
  KAMERA_TRY(need("the layer list", w.layers.size(), size_t(cfg.n_layers)));
  const bool rms = cfg.rms_norm();
  for (const auto& L : w.layers) {
    KAMERA_TRY(need("ln1", L.ln1_w.size(), d));
    KAMERA_TRY(need("ln2", L.ln2_w.size(), d));
    KAMERA_TRY(need("ln1 bias", L.ln1_b.size(), rms ? 0 : d));
    KAMERA_TRY(need("ln2 bias", L.ln2_b.size(), rms ? 0 : d));
    for (const QwenLinear* l : {&L.q, &L.k, &L.v, &L.o}) KAMERA_TRY(lin("attention", *l, d, d));
    if (cfg.act == QwenVisionAct::SiluGated) KAMERA_TRY(lin("ffn gate", L.gate, d, f));
    KAMERA_TRY(lin("ffn input", L.up, d, f));
    KAMERA_TRY(lin("ffn output", L.down, f, d));
  }
  KAMERA_TRY(need("the position table", w.pos_embd.size(), size_t(cfg.n_pos_embd) * d));
  KAMERA_TRY(need("the deepstack mergers", w.deepstack.size(), cfg.deepstack_layers.size()));
  for (const auto& ds : w.deepstack) {
    const size_t mw = size_t(cfg.merged_width());
    KAMERA_TRY(need("a deepstack norm", ds.norm_w.size(), mw));
    KAMERA_TRY(need("a deepstack norm bias", ds.norm_b.size(), mw));
    KAMERA_TRY(lin("a deepstack fc1", ds.fc1, mw, mw));
    KAMERA_TRY(lin("a deepstack fc2", ds.fc2, mw, size_t(cfg.out_dim)));
  }
  KAMERA_TRY(need("post_ln", w.post_ln_w.size(), d));
  KAMERA_TRY(need("post_ln bias", w.post_ln_b.size(), rms ? 0 : d));
  const size_t mw = size_t(cfg.merged_width());
  KAMERA_TRY(lin("mm.0", w.mm0, mw, mw));
  KAMERA_TRY(lin("mm.2", w.mm2, mw, size_t(cfg.out_dim)));
  return Status::Ok();
}

size_t QwenVisionModel::weight_bytes() const {
  size_t n = w.patch.w.bytes();
  for (const auto& L : w.layers)
    for (const QwenLinear* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) n += l->w.bytes();
  for (const auto& ds : w.deepstack) n += ds.fc1.w.bytes() + ds.fc2.w.bytes();
  return n + w.mm0.w.bytes() + w.mm2.w.bytes();
}

}  // namespace kamera
