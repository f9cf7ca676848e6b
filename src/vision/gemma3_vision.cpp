// Gemma 3's tower: config checks, the tensor table and the mmproj loader (gemma3_vision.h lists
// the keys and tensor names).
#include "vision/gemma3_vision.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "vision/clip_keys.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

constexpr const char* kProjector = "gemma3";
constexpr const char* kScaleFactor = "clip.vision.projector.scale_factor";

std::vector<ClipTensor> tensor_specs(const Gemma3VisionConfig& c, Gemma3VisionWeights& w) {
  std::vector<ClipTensor> s;
  siglip_tensors(c.siglip(), w.vit, s);
  s.push_back({"mm.soft_emb_norm.weight", {c.dim}, &w.soft_norm, nullptr});
  s.push_back({"mm.input_projection.weight", {c.out_dim, c.dim}, &w.proj_file, nullptr});
  return s;
}

Status read_config(const GgufFile& g, const std::string& path, Gemma3VisionConfig* c) {
  ClipCommon cc{c->patch,   c->dim, c->n_layers,   c->n_heads,  c->ffn_dim,
                c->out_dim, 1e-6f,  c->image_mean, c->image_std};
  KAMERA_TRY(read_clip_common(g, path, kProjector, "Gemma 3", &cc));
  c->patch = cc.patch, c->dim = cc.dim, c->n_layers = cc.n_layers, c->n_heads = cc.n_heads;
  c->ffn_dim = cc.ffn_dim, c->out_dim = cc.out_dim, c->eps = cc.eps;
  c->image_mean = cc.image_mean, c->image_std = cc.image_std;
  KAMERA_TRY(clip_count(g, path, gk::kVisionImageSize, &c->image_size, 1, 8192));
  c->pool = 4;
  if (g.has(kScaleFactor)) KAMERA_TRY(clip_count(g, path, kScaleFactor, &c->pool, 1, 64));
  return c->validate();
}

void compute_fingerprint(Gemma3VisionModel& m) {
  const Gemma3VisionConfig& c = m.cfg;
  const int ints[] = {c.image_size, c.patch,   c.dim,  c.n_layers,
                      c.n_heads,    c.ffn_dim, c.pool, c.out_dim};
  const float reals[] = {c.eps,          c.image_mean[0], c.image_mean[1], c.image_mean[2],
                         c.image_std[0], c.image_std[1],  c.image_std[2]};
  m.fingerprint = clip_fingerprint(kProjector, ints, reals, tensor_specs(m.cfg, m.w));
}

}  // namespace

Status Gemma3VisionConfig::validate() const {
  auto bad = [](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "gemma3 vision: {}", what);
  };
  if (patch < 1 || image_size < patch || pool < 1 || side() % pool != 0)
    return bad(fmt::format("pictures of {} pixels in patches of {} ({} a side) do not pool by {}",
                           image_size, patch, side(), pool));
  if (out_dim < 1) return bad(fmt::format("out {}", out_dim));
  return validate_siglip(siglip(), "gemma3");
}

Result<Gemma3VisionModel> Gemma3VisionModel::load(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  const GgufFile& g = *file;
  KAMERA_TRY(clip_vision_file(g, path));
  Gemma3VisionModel m;
  m.source = path;
  KAMERA_TRY(read_config(g, path, &m.cfg));
  KAMERA_TRY(load_clip_tensors(g, path, tensor_specs(m.cfg, m.w), "Gemma 3"));
  // the file's (dim x out) parameter as the product's out x dim rows
  const int d = m.cfg.dim, o = m.cfg.out_dim;
  std::vector<float> t(size_t(d) * o);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < o; ++j) t[size_t(j) * d + i] = m.w.proj_file[size_t(i) * o + j];
  m.w.proj.in = d;
  m.w.proj.out = o;
  m.w.proj.w = Weight::from_f32(std::move(t), o, d);
  m.mapping = file->mapping();
  compute_fingerprint(m);
  return m;
}

}  // namespace kamera
