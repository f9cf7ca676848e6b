// SmolVLM's tower: config checks, the tensor table and the mmproj loader (idefics3_vision.h lists
// the keys and tensor names).
#include "vision/idefics3_vision.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "vision/clip_keys.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

constexpr const char* kProjector = "idefics3";
constexpr const char* kScaleFactor = "clip.vision.projector.scale_factor";
constexpr const char* kPreprocImageSize = "clip.vision.preproc_image_size";

std::vector<ClipTensor> tensor_specs(const Idefics3VisionConfig& c, Idefics3VisionWeights& w) {
  std::vector<ClipTensor> s;
  siglip_tensors(c.siglip(), w.vit, s);
  w.proj.in = c.merged_width();
  w.proj.out = c.out_dim;
  s.push_back({"mm.model.fc.weight", {c.merged_width(), c.out_dim}, nullptr, &w.proj});
  return s;
}

Status read_config(const GgufFile& g, const std::string& path, Idefics3VisionConfig* c) {
  ClipCommon cc{c->patch,   c->dim, c->n_layers,   c->n_heads,  c->ffn_dim,
                c->out_dim, 1e-6f,  c->image_mean, c->image_std};
  KAMERA_TRY(read_clip_common(g, path, kProjector, "SmolVLM", &cc));
  c->patch = cc.patch, c->dim = cc.dim, c->n_layers = cc.n_layers, c->n_heads = cc.n_heads;
  c->ffn_dim = cc.ffn_dim, c->out_dim = cc.out_dim, c->eps = cc.eps;
  c->image_mean = cc.image_mean, c->image_std = cc.image_std;
  KAMERA_TRY(clip_count(g, path, gk::kVisionImageSize, &c->image_size, 1, 8192));
  c->scale = 2;
  if (g.has(kScaleFactor)) KAMERA_TRY(clip_count(g, path, kScaleFactor, &c->scale, 1, 16));
  c->longest_edge = 4 * c->image_size;
  if (g.has(kPreprocImageSize))
    KAMERA_TRY(clip_count(g, path, kPreprocImageSize, &c->longest_edge, 1, 1 << 16));
  return c->validate();
}

void compute_fingerprint(Idefics3VisionModel& m) {
  const Idefics3VisionConfig& c = m.cfg;
  const int ints[] = {c.image_size, c.patch, c.dim,     c.n_layers,    c.n_heads,
                      c.ffn_dim,    c.scale, c.out_dim, c.longest_edge};
  const float reals[] = {c.eps,          c.image_mean[0], c.image_mean[1], c.image_mean[2],
                         c.image_std[0], c.image_std[1],  c.image_std[2]};
  m.fingerprint = clip_fingerprint(kProjector, ints, reals, tensor_specs(m.cfg, m.w));
}

}  // namespace

Status Idefics3VisionConfig::validate() const {
  auto bad = [](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "idefics3 vision: {}", what);
  };
  if (patch < 1 || image_size < patch || scale < 1 || side() % scale != 0)
    return bad(fmt::format("tiles of {} pixels in patches of {} ({} a side) do not shuffle by {}",
                           image_size, patch, side(), scale));
  if (out_dim < 1 || longest_edge < 1)
    return bad(fmt::format("out {}, longest edge {}", out_dim, longest_edge));
  return validate_siglip(siglip(), "idefics3");
}

Result<Idefics3VisionModel> Idefics3VisionModel::load(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  const GgufFile& g = *file;
  KAMERA_TRY(clip_vision_file(g, path));
  Idefics3VisionModel m;
  m.source = path;
  KAMERA_TRY(read_config(g, path, &m.cfg));
  KAMERA_TRY(load_clip_tensors(g, path, tensor_specs(m.cfg, m.w), "SmolVLM"));
  m.mapping = file->mapping();
  compute_fingerprint(m);
  return m;
}

}  // namespace kamera
