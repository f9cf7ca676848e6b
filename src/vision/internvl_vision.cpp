// InternVL's tower: config checks, the tensor table and the mmproj loader (internvl_vision.h lists
// the keys and tensor names).
#include "vision/internvl_vision.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "vision/clip_keys.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

constexpr const char* kProjector = "internvl";
constexpr const char* kFamily = "InternVL";
constexpr const char* kScaleFactor = "clip.vision.projector.scale_factor";
constexpr const char* kMinTiles = "clip.vision.preproc_min_tiles";
constexpr const char* kMaxTiles = "clip.vision.preproc_max_tiles";

std::vector<ClipTensor> tensor_specs(const InternvlVisionConfig& c, InternvlVisionWeights& w) {
  const int64_t d = c.dim, f = c.ffn_dim, p = c.patch, m = c.merged_dim(), o = c.out_dim;
  std::vector<ClipTensor> s;
  auto linear = [&s](const std::string& name, QwenLinear& l, int in, int out,
                     std::vector<int64_t> ne) { clip_linear(s, name, l, in, out, std::move(ne)); };
  auto vec = [&s](const std::string& name, std::vector<float>& v, std::vector<int64_t> ne) {
    clip_vector(s, name, v, std::move(ne));
  };
  vec("v.class_embd", w.cls, {d, 1, 1});
  linear("v.patch_embd", w.patch, c.vit().patch_values(), c.dim, {p, p, 3, d});
  vec("v.position_embd.weight", w.pos, {d, int64_t(c.n_patches()) + 1, 1});
  w.layers.resize(size_t(c.n_layers));
  for (int i = 0; i < c.n_layers; ++i) {
    auto& L = w.layers[size_t(i)];
    const std::string b = "v.blk." + std::to_string(i) + ".";
    linear(b + "attn_q", L.q, c.dim, c.dim, {d, d});
    linear(b + "attn_k", L.k, c.dim, c.dim, {d, d});
    linear(b + "attn_v", L.v, c.dim, c.dim, {d, d});
    linear(b + "attn_out", L.o, c.dim, c.dim, {d, d});
    vec(b + "ln1.weight", L.ln1_w, {d});
    vec(b + "ln1.bias", L.ln1_b, {d});
    vec(b + "ln2.weight", L.ln2_w, {d});
    vec(b + "ln2.bias", L.ln2_b, {d});
    linear(b + "ffn_up", L.fc1, c.dim, c.ffn_dim, {d, f});
    linear(b + "ffn_down", L.fc2, c.ffn_dim, c.dim, {f, d});
    vec(b + "ls1.weight", L.ls1, {d});
    vec(b + "ls2.weight", L.ls2, {d});
  }
  vec("mm.model.mlp.0.weight", w.mm_norm_w, {m});
  vec("mm.model.mlp.0.bias", w.mm_norm_b, {m});
  linear("mm.model.mlp.1", w.mm1, c.merged_dim(), c.out_dim, {m, o});
  linear("mm.model.mlp.3", w.mm3, c.out_dim, c.out_dim, {o, o});
  return s;
}

Status read_config(const GgufFile& g, const std::string& path, InternvlVisionConfig* c) {
  ClipCommon cc{c->patch,   c->dim, c->n_layers,   c->n_heads,  c->ffn_dim,
                c->out_dim, 1e-6f,  c->image_mean, c->image_std};
  KAMERA_TRY(read_clip_common(g, path, kProjector, kFamily, &cc));
  if (!g.get_bool(gk::kClipUseGelu).value_or(false) || g.get_bool(gk::kClipUseSilu).value_or(false))
    return make_error(
        ErrorCode::Unsupported,
        "{}: InternVL's MLP is GELU: the file must say clip.use_gelu = true (llama.cpp "
        "runs quick-GELU without it, SiLU with clip.use_silu)",
        path);
  c->patch = cc.patch, c->dim = cc.dim, c->n_layers = cc.n_layers, c->n_heads = cc.n_heads;
  c->ffn_dim = cc.ffn_dim, c->out_dim = cc.out_dim, c->eps = cc.eps;
  c->image_mean = cc.image_mean, c->image_std = cc.image_std;
  KAMERA_TRY(clip_count(g, path, gk::kVisionImageSize, &c->image_size, 1, 8192));
  KAMERA_TRY(clip_count(g, path, kScaleFactor, &c->scale, 1, 64));
  if (g.has(kMinTiles)) KAMERA_TRY(clip_count(g, path, kMinTiles, &c->min_tiles, 1, 1024));
  if (g.has(kMaxTiles)) KAMERA_TRY(clip_count(g, path, kMaxTiles, &c->max_tiles, 1, 1024));
  if (c->dim == 3200 && c->n_layers == 45)
    return make_error(ErrorCode::Unsupported,
                      "{}: InternViT-6B (RMSNorm, q / k norms) is not supported; InternViT-300M "
                      "towers are",
                      path);
  return c->validate();
}

void compute_fingerprint(InternvlVisionModel& m) {
  const InternvlVisionConfig& c = m.cfg;
  const int ints[] = {c.image_size, c.patch, c.dim,     c.n_layers,  c.n_heads,
                      c.ffn_dim,    c.scale, c.out_dim, c.min_tiles, c.max_tiles};
  const float reals[] = {c.eps,          c.image_mean[0], c.image_mean[1], c.image_mean[2],
                         c.image_std[0], c.image_std[1],  c.image_std[2]};
  m.fingerprint = clip_fingerprint(kProjector, ints, reals, tensor_specs(m.cfg, m.w));
}

}  // namespace

Status InternvlVisionConfig::validate() const {
  auto bad = [](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "internvl vision: {}", what);
  };
  if (patch < 1 || image_size < patch || scale < 1 || side() % scale != 0)
    return bad(fmt::format("tiles of {} pixels in patches of {} ({} a side) do not shuffle by {}",
                           image_size, patch, side(), scale));
  if (min_tiles < 1 || max_tiles < min_tiles)
    return bad(fmt::format("tiles {} .. {}", min_tiles, max_tiles));
  if (out_dim < 1) return bad(fmt::format("out {}", out_dim));
  return validate_siglip(vit(), "internvl");
}

Result<InternvlVisionModel> InternvlVisionModel::load(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  const GgufFile& g = *file;
  KAMERA_TRY(clip_vision_file(g, path));
  InternvlVisionModel m;
  m.source = path;
  KAMERA_TRY(read_config(g, path, &m.cfg));
  KAMERA_TRY(load_clip_tensors(g, path, tensor_specs(m.cfg, m.w), kFamily));
  m.mapping = file->mapping();
  compute_fingerprint(m);
  return m;
}

}  // namespace kamera
