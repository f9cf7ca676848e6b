// Kimi-VL's MoonViT tower: config, presets, the tensor table, the mmproj loader and writer, seeded
// random weights and the fingerprint (kimi_vision.h lists the keys and tensor names).
#include "vision/kimi_vision.h"

#include <xxhash.h>

#include <cmath>
#include <cstring>

#include "core/mix.h"
#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "vision/clip_keys.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

constexpr const char* kProjector = "kimivl";
constexpr const char* kScaleFactor = "clip.vision.projector.scale_factor";

// One tensor of the file: a product's matrix or bias, or an f32 vector. The pointers are const:
// load() and random() write through them into weights they own (shaped by shape_weights).
struct Spec {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order, ne[0] contiguous
  const std::vector<float>* vec = nullptr;
  const QwenLinear* lin = nullptr;  // ".weight" (the matrix) and ".bias" entries share it
  bool is_bias = false;
  char kind = 'w';  // random fill: w weight, n norm, b bias, p position table
};

// Sizes w's layer list and the products' shapes to the config.
void shape_weights(const KimiVisionConfig& c, KimiVisionWeights& w) {
  const int d = c.dim, f = c.ffn_dim, mw = c.merged_width();
  w.patch.in = c.patch_values();
  w.patch.out = d;
  w.layers.resize(size_t(c.n_layers));
  for (auto& L : w.layers) {
    for (QwenLinear* l : {&L.q, &L.k, &L.v, &L.o}) l->in = l->out = d;
    L.fc0.in = L.fc1.out = d;
    L.fc0.out = L.fc1.in = f;
  }
  w.mm1.in = w.mm1.out = w.mm2.in = mw;
  w.mm2.out = c.out_dim;
}

// Every tensor of a file of this config (w shaped by shape_weights).
std::vector<Spec> tensor_specs(const KimiVisionConfig& c, const KimiVisionWeights& w) {
  const int64_t d = c.dim, f = c.ffn_dim, p = c.patch, mw = c.merged_width();
  std::vector<Spec> s;
  auto linear = [&s](const std::string& name, const QwenLinear& l, std::vector<int64_t> ne) {
    s.push_back({name + ".weight", std::move(ne), nullptr, &l, false, 'w'});
    s.push_back({name + ".bias", {l.out}, &l.b, &l, true, 'b'});
  };
  linear("v.patch_embd", w.patch, {p, p, 3, d});
  s.push_back({"v.position_embd.weight",
               {d, int64_t(c.pos_side) * c.pos_side},
               &w.pos,
               nullptr,
               false,
               'p'});
  for (int i = 0; i < c.n_layers; ++i) {
    const auto& L = w.layers[size_t(i)];
    const std::string b = "v.blk." + std::to_string(i) + ".";
    s.push_back({b + "ln1.weight", {d}, &L.ln1_w, nullptr, false, 'n'});
    s.push_back({b + "ln1.bias", {d}, &L.ln1_b, nullptr, false, 'b'});
    linear(b + "attn_q", L.q, {d, d});
    linear(b + "attn_k", L.k, {d, d});
    linear(b + "attn_v", L.v, {d, d});
    linear(b + "attn_out", L.o, {d, d});
    s.push_back({b + "ln2.weight", {d}, &L.ln2_w, nullptr, false, 'n'});
    s.push_back({b + "ln2.bias", {d}, &L.ln2_b, nullptr, false, 'b'});
    linear(b + "ffn_up", L.fc0, {d, f});
    linear(b + "ffn_down", L.fc1, {f, d});
  }
  s.push_back({"v.post_ln.weight", {d}, &w.post_ln_w, nullptr, false, 'n'});
  s.push_back({"v.post_ln.bias", {d}, &w.post_ln_b, nullptr, false, 'b'});
  s.push_back({"mm.input_norm.weight", {d}, &w.mm_norm_w, nullptr, false, 'n'});
  s.push_back({"mm.input_norm.bias", {d}, &w.mm_norm_b, nullptr, false, 'b'});
  linear("mm.1", w.mm1, {mw, mw});
  linear("mm.2", w.mm2, {mw, c.out_dim});
  return s;
}

std::string shape_str(const std::vector<int64_t>& ne) {
  return fmt::format("[{}]", fmt::join(ne, ", "));
}

Status read_config(const GgufFile& g, const std::string& path, KimiVisionConfig* c) {
  ClipCommon cc{c->patch,   c->dim, c->n_layers,   c->n_heads,  c->ffn_dim,
                c->out_dim, 1e-5f,  c->image_mean, c->image_std};
  KAMERA_TRY(read_clip_common(g, path, kProjector, "Kimi-VL", &cc));
  c->patch = cc.patch, c->dim = cc.dim, c->n_layers = cc.n_layers, c->n_heads = cc.n_heads;
  c->ffn_dim = cc.ffn_dim, c->out_dim = cc.out_dim, c->eps = cc.eps;
  c->image_mean = cc.image_mean, c->image_std = cc.image_std;
  c->merge = 2;
  if (g.has(kScaleFactor)) KAMERA_TRY(clip_count(g, path, kScaleFactor, &c->merge, 1, 8));
  const int64_t area = int64_t(c->patch) * c->patch;
  const int64_t max_px = g.get_int(gk::kVisionImageMaxPixels).value_or(4096 * area);
  if (max_px < area || max_px / area > 1 << 24)
    return make_error(ErrorCode::CorruptData, "{}: {} = {}", path, gk::kVisionImageMaxPixels,
                      max_px);
  c->in_token_limit = int(max_px / area);
  // the position table is square: its side is the root of its rows
  const GgufTensor* pos = g.find_tensor("v.position_embd.weight");
  if (!pos || pos->ne.size() != 2)
    return make_error(ErrorCode::CorruptData, "{}: v.position_embd.weight is missing", path);
  c->pos_side = int(std::lround(std::sqrt(double(pos->ne[1]))));
  if (int64_t(c->pos_side) * c->pos_side != pos->ne[1])
    return make_error(ErrorCode::CorruptData,
                      "{}: v.position_embd.weight has {} rows, not a square table", path,
                      pos->ne[1]);
  return c->validate();
}

}  // namespace

Status KimiVisionConfig::validate() const {
  auto bad = [](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "kimi vision: {}", what);
  };
  if (patch < 1 || patch > 64 || merge < 1 || merge > 8)
    return bad(fmt::format("patch {}, merge {}", patch, merge));
  if (dim < 4 || dim > 16384 || n_heads < 1 || dim % n_heads != 0 || head_dim() % 4 != 0)
    return bad(fmt::format("width {} with {} heads: heads must divide it into a multiple of 4", dim,
                           n_heads));
  if (n_layers < 0 || n_layers > 256 || ffn_dim < 1 || ffn_dim > 65536 || out_dim < 1 ||
      out_dim > 65536 || pos_side < 1 || pos_side > 4096)
    return bad(fmt::format("layers {}, ffn {}, out {}, position table side {}", n_layers, ffn_dim,
                           out_dim, pos_side));
  if (!(eps > 0.0f) || !(proj_eps > 0.0f) || !(rope_theta > 0.0))
    return bad("epsilons and rope theta must be positive");
  if (in_token_limit < merge * merge) return bad(fmt::format("token limit {}", in_token_limit));
  for (int c = 0; c < 3; ++c)
    if (!(image_std[size_t(c)] > 0.0f)) return bad("image std must be positive");
  return Status::Ok();
}

std::optional<KimiVisionConfig> kimi_vision_preset(const std::string& preset) {
  KimiVisionConfig c;
  if (preset == "tiny") {
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = 4;
    c.ffn_dim = 96;
    c.out_dim = 64;
    c.pos_side = 8;
  } else if (preset != "a3b") {  // a3b: Kimi-VL-A3B's vision_config, the defaults above
    return std::nullopt;
  }
  return c;
}

Result<KimiVisionModel> KimiVisionModel::load(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  const GgufFile& g = *file;
  KAMERA_TRY(clip_vision_file(g, path));
  KimiVisionModel m;
  m.source = path;
  KAMERA_TRY(read_config(g, path, &m.cfg));
  shape_weights(m.cfg, m.w);
  for (const Spec& t : tensor_specs(m.cfg, m.w)) {  // m.w is ours: its specs are written
    const GgufTensor* gt = g.find_tensor(t.name);
    if (!gt) return make_error(ErrorCode::CorruptData, "{}: tensor {} is missing", path, t.name);
    if (gt->ne != t.ne)
      return make_error(ErrorCode::CorruptData, "{}: tensor {} has shape {}, this config needs {}",
                        path, t.name, shape_str(gt->ne), shape_str(t.ne));
    if (t.lin && !t.is_bias) {  // the file's bytes in its type, in the mapping the model keeps
      auto b = Weight::borrow(gt->type, gt->data, t.lin->out, t.lin->in);
      if (!b.ok()) return make_error(b.code(), "{}: tensor {}: {}", path, t.name, b.message());
      const_cast<QwenLinear*>(t.lin)->w = std::move(b.value());
      continue;
    }
    KAMERA_ASSIGN_OR_RETURN(*const_cast<std::vector<float>*>(t.vec), g.read_f32(*gt));
  }
  if (g.tensors().size() != tensor_specs(m.cfg, m.w).size())
    return make_error(ErrorCode::Unsupported,
                      "{}: {} tensors, a Kimi-VL tower of this config has {} (kamera would ignore "
                      "the others)",
                      path, g.tensors().size(), tensor_specs(m.cfg, m.w).size());
  m.mapping = file->mapping();  // the matrices point into it
  m.finish();
  return m;
}

Status KimiVisionModel::write_gguf(const std::string& path, DType weight_type) const {
  KAMERA_TRY(cfg.validate());
  if (weight_type == DType::BF16)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: mmproj weights are written as f32, f16 or q8_0", path);
  // the patch kernel's rows of 14 fit no Q8_0 block: F16 beside Q8_0 matrices
  const DType patch_type = weight_type == DType::Q8_0 ? DType::F16 : weight_type;
  GgufWriter g;
  g.set_string(gk::kArchitecture, "clip");
  g.set_string(gk::kName, "kamera-synthetic-kimi-vl-vision");
  g.set_u32(gk::kFileType, weight_type == DType::F16 ? 1 : weight_type == DType::Q8_0 ? 7 : 0);
  g.set_bool(gk::kClipHasTextEncoder, false);
  g.set_bool(gk::kClipHasVisionEncoder, true);
  g.set_string(gk::kClipProjectorType, kProjector);
  g.set_bool(gk::kClipUseGelu, true);
  g.set_u32(gk::kVisionPatchSize, uint32_t(cfg.patch));
  g.set_u32(gk::kVisionImageSize, uint32_t(cfg.pos_side * cfg.patch));
  g.set_u32(gk::kVisionEmbeddingLength, uint32_t(cfg.dim));
  g.set_u32(gk::kVisionFeedForwardLength, uint32_t(cfg.ffn_dim));
  g.set_u32(gk::kVisionProjectionDim, uint32_t(cfg.out_dim));
  g.set_u32(gk::kVisionHeadCount, uint32_t(cfg.n_heads));
  g.set_f32(gk::kVisionLayerNormEps, cfg.eps);
  g.set_u32(gk::kVisionBlockCount, uint32_t(cfg.n_layers));
  g.set_u32(kScaleFactor, uint32_t(cfg.merge));
  g.set_u32(gk::kVisionImageMaxPixels, uint32_t(cfg.in_token_limit * cfg.patch * cfg.patch));
  g.set_f32_array(gk::kVisionImageMean, {cfg.image_mean.begin(), cfg.image_mean.end()});
  g.set_f32_array(gk::kVisionImageStd, {cfg.image_std.begin(), cfg.image_std.end()});
  for (const Spec& t : tensor_specs(cfg, w)) {
    if (t.lin && !t.is_bias) {
      const Weight* m = &t.lin->w;
      g.add_tensor(t.name, t.ne, t.ne.size() == 4 ? patch_type : weight_type,
                   [m](float* dst) { m->rows_f32(0, m->rows(), dst); });
      continue;
    }
    const std::vector<float>* src = t.vec;
    g.add_tensor(t.name, t.ne, DType::F32,
                 [src](float* dst) { std::memcpy(dst, src->data(), src->size() * sizeof(float)); });
  }
  return g.write(path);
}

namespace {

// splitmix64: the state advances by the golden gamma, each output is its finalizer.
struct SplitMix {
  uint64_t s;
  float symmetric() {  // [-1, 1)
    return float(mix64_finalize(s += 0x9e3779b97f4a7c15ull) >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
};

// Weights uniform with standard deviation 1/sqrt(fan_in); norms 1 +- 0.1; biases +- 0.05; the
// position table +- 0.5.
std::vector<float> fill(size_t n, uint64_t seed, const std::string& name, int64_t fan_in,
                        char kind) {
  SplitMix rng{seed ^ XXH3_64bits(name.data(), name.size())};
  std::vector<float> v(n);
  const float a = std::sqrt(3.0f / float(std::max<int64_t>(fan_in, 1)));
  for (float& x : v) {
    const float u = rng.symmetric();
    x = kind == 'n' ? 1.0f + 0.1f * u : kind == 'b' ? 0.05f * u : kind == 'p' ? 0.5f * u : a * u;
  }
  return v;
}

}  // namespace

KimiVisionModel KimiVisionModel::random(const KimiVisionConfig& cfg, uint64_t seed) {
  KimiVisionModel m;
  m.cfg = cfg;
  m.source = fmt::format("random(seed {})", seed);
  shape_weights(m.cfg, m.w);
  for (const Spec& t : tensor_specs(m.cfg, m.w)) {  // m.w is ours: its specs are written
    size_t n = 1;
    for (int64_t e : t.ne) n *= size_t(e);
    if (t.lin && !t.is_bias) {
      const_cast<QwenLinear*>(t.lin)->w =
          Weight::from_f32(fill(n, seed, t.name, t.lin->in, 'w'), t.lin->out, t.lin->in);
      continue;
    }
    *const_cast<std::vector<float>*>(t.vec) = fill(n, seed, t.name, 1, t.kind);
  }
  m.finish();
  return m;
}

void KimiVisionModel::finish() {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  const int ints[] = {cfg.patch,   cfg.merge,   cfg.dim,      cfg.n_layers,      cfg.n_heads,
                      cfg.ffn_dim, cfg.out_dim, cfg.pos_side, cfg.in_token_limit};
  const double reals[] = {cfg.eps,           cfg.proj_eps,      cfg.rope_theta,
                          cfg.image_mean[0], cfg.image_mean[1], cfg.image_mean[2],
                          cfg.image_std[0],  cfg.image_std[1],  cfg.image_std[2]};
  XXH3_128bits_update(st, "kimivl", 6);
  XXH3_128bits_update(st, ints, sizeof(ints));
  XXH3_128bits_update(st, reals, sizeof(reals));
  for (const Spec& t : tensor_specs(cfg, w)) {
    if (t.lin && !t.is_bias) {
      const Weight& m = t.lin->w;
      const uint32_t type = uint32_t(m.type());
      XXH3_128bits_update(st, &type, sizeof(type));
      if (m.bytes() > 0) XXH3_128bits_update(st, m.raw(), m.bytes());
      continue;
    }
    const uint64_t n = t.vec->size();
    XXH3_128bits_update(st, &n, sizeof(n));
    XXH3_128bits_update(st, t.vec->data(), n * sizeof(float));
  }
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  fingerprint = {h.high64, h.low64};
}

int64_t KimiVisionModel::n_parameters() const {
  int64_t n = 0;
  KimiVisionWeights shaped;  // only the layer count and the shapes matter here
  shape_weights(cfg, shaped);
  for (const Spec& t : tensor_specs(cfg, shaped)) {
    int64_t k = 1;
    for (int64_t e : t.ne) k *= e;
    n += k;
  }
  return n;
}

}  // namespace kamera
