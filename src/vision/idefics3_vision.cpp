// SmolVLM's tower: config checks, the tensor table and the mmproj loader (idefics3_vision.h lists
// the keys and tensor names).
#include "vision/idefics3_vision.h"

#include <xxhash.h>

#include <cstring>

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "vision/clip_keys.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

constexpr const char* kProjector = "idefics3";
constexpr const char* kScaleFactor = "clip.vision.projector.scale_factor";
constexpr const char* kPreprocImageSize = "clip.vision.preproc_image_size";

// One tensor of the file: a product's matrix (lin, not bias) or an f32 vector (vec).
struct Spec {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order
  std::vector<float>* vec = nullptr;
  QwenLinear* lin = nullptr;
};

std::vector<Spec> tensor_specs(const Idefics3VisionConfig& c, Idefics3VisionWeights& w) {
  const int64_t d = c.dim, f = c.ffn_dim, p = c.patch;
  std::vector<Spec> s;
  auto linear = [&s](const std::string& name, QwenLinear& l, int in, int out,
                     std::vector<int64_t> ne, bool bias) {
    l.in = in;
    l.out = out;
    s.push_back({name + ".weight", std::move(ne), nullptr, &l});
    if (bias) s.push_back({name + ".bias", {out}, &l.b, nullptr});
  };
  auto vec = [&s](const std::string& name, std::vector<float>& v, std::vector<int64_t> ne) {
    s.push_back({name, std::move(ne), &v, nullptr});
  };
  linear("v.patch_embd", w.patch, c.patch_values(), c.dim, {p, p, 3, d}, true);
  vec("v.position_embd.weight", w.pos, {d, int64_t(c.n_patches())});
  w.layers.resize(size_t(c.n_layers));
  for (int i = 0; i < c.n_layers; ++i) {
    auto& L = w.layers[size_t(i)];
    const std::string b = "v.blk." + std::to_string(i) + ".";
    vec(b + "ln1.weight", L.ln1_w, {d});
    vec(b + "ln1.bias", L.ln1_b, {d});
    linear(b + "attn_q", L.q, c.dim, c.dim, {d, d}, true);
    linear(b + "attn_k", L.k, c.dim, c.dim, {d, d}, true);
    linear(b + "attn_v", L.v, c.dim, c.dim, {d, d}, true);
    linear(b + "attn_out", L.o, c.dim, c.dim, {d, d}, true);
    vec(b + "ln2.weight", L.ln2_w, {d});
    vec(b + "ln2.bias", L.ln2_b, {d});
    linear(b + "ffn_up", L.fc1, c.dim, c.ffn_dim, {d, f}, true);
    linear(b + "ffn_down", L.fc2, c.ffn_dim, c.dim, {f, d}, true);
  }
  vec("v.post_ln.weight", w.post_ln_w, {d});
  vec("v.post_ln.bias", w.post_ln_b, {d});
  linear("mm.model.fc", w.proj, c.merged_width(), c.out_dim, {c.merged_width(), c.out_dim}, false);
  return s;
}

Status read_config(const GgufFile& g, const std::string& path, Idefics3VisionConfig* c) {
  const std::string proj = g.get_string(gk::kClipProjectorType).value_or("");
  if (proj != kProjector)
    return make_error(ErrorCode::Unsupported, "{}: projector type '{}' is not SmolVLM's ('{}')",
                      path, proj, kProjector);
  if (!g.get_bool(gk::kClipUseGelu).value_or(true))
    return make_error(ErrorCode::Unsupported,
                      "{}: clip.use_gelu = false: SigLIP's MLP is GELU (tanh form)", path);
  KAMERA_TRY(clip_count(g, path, gk::kVisionImageSize, &c->image_size, 1, 8192));
  KAMERA_TRY(clip_count(g, path, gk::kVisionPatchSize, &c->patch, 1, 64));
  KAMERA_TRY(clip_count(g, path, gk::kVisionEmbeddingLength, &c->dim, 4, 16384));
  KAMERA_TRY(clip_count(g, path, gk::kVisionBlockCount, &c->n_layers, 0, 256));
  KAMERA_TRY(clip_count(g, path, gk::kVisionHeadCount, &c->n_heads, 1, 1024));
  KAMERA_TRY(clip_count(g, path, gk::kVisionFeedForwardLength, &c->ffn_dim, 1, 65536));
  KAMERA_TRY(clip_count(g, path, gk::kVisionProjectionDim, &c->out_dim, 1, 65536));
  c->scale = 2;
  if (g.has(kScaleFactor)) KAMERA_TRY(clip_count(g, path, kScaleFactor, &c->scale, 1, 16));
  c->longest_edge = 4 * c->image_size;
  if (g.has(kPreprocImageSize))
    KAMERA_TRY(clip_count(g, path, kPreprocImageSize, &c->longest_edge, 1, 1 << 16));
  c->eps = float(g.get_float(gk::kVisionLayerNormEps).value_or(1e-6));
  KAMERA_TRY(clip_mean_std(g, path, &c->image_mean, &c->image_std));
  return c->validate();
}

std::string shape_str(const std::vector<int64_t>& ne) {
  return fmt::format("[{}]", fmt::join(ne, ", "));
}

void compute_fingerprint(Idefics3VisionModel& m) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  const Idefics3VisionConfig& c = m.cfg;
  const int ints[] = {c.image_size, c.patch, c.dim,     c.n_layers,    c.n_heads,
                      c.ffn_dim,    c.scale, c.out_dim, c.longest_edge};
  const float reals[] = {c.eps,          c.image_mean[0], c.image_mean[1], c.image_mean[2],
                         c.image_std[0], c.image_std[1],  c.image_std[2]};
  XXH3_128bits_update(st, kProjector, std::strlen(kProjector));
  XXH3_128bits_update(st, ints, sizeof(ints));
  XXH3_128bits_update(st, reals, sizeof(reals));
  for (const Spec& t : tensor_specs(m.cfg, m.w)) {
    if (t.lin) {
      const uint32_t type = uint32_t(t.lin->w.type());
      XXH3_128bits_update(st, &type, sizeof(type));
      if (t.lin->w.bytes() > 0) XXH3_128bits_update(st, t.lin->w.raw(), t.lin->w.bytes());
      continue;
    }
    const uint64_t n = t.vec->size();
    XXH3_128bits_update(st, &n, sizeof(n));
    XXH3_128bits_update(st, t.vec->data(), n * sizeof(float));
  }
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  m.fingerprint = {h.high64, h.low64};
}

}  // namespace

Status Idefics3VisionConfig::validate() const {
  auto bad = [](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "idefics3 vision: {}", what);
  };
  if (patch < 1 || image_size < patch || scale < 1 || side() % scale != 0)
    return bad(fmt::format("tiles of {} pixels in patches of {} ({} a side) do not shuffle by {}",
                           image_size, patch, side(), scale));
  if (dim < 4 || n_heads < 1 || dim % n_heads != 0)
    return bad(fmt::format("width {} with {} heads", dim, n_heads));
  if (n_layers < 0 || ffn_dim < 1 || out_dim < 1 || longest_edge < 1)
    return bad(fmt::format("layers {}, ffn {}, out {}, longest edge {}", n_layers, ffn_dim, out_dim,
                           longest_edge));
  if (!(eps > 0.0f)) return bad("layer norm epsilon must be positive");
  for (int c = 0; c < 3; ++c)
    if (!(image_std[size_t(c)] > 0.0f)) return bad("image std must be positive");
  return Status::Ok();
}

Result<Idefics3VisionModel> Idefics3VisionModel::load(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  const GgufFile& g = *file;
  KAMERA_TRY(clip_vision_file(g, path));
  Idefics3VisionModel m;
  m.source = path;
  KAMERA_TRY(read_config(g, path, &m.cfg));
  const std::vector<Spec> specs = tensor_specs(m.cfg, m.w);
  for (const Spec& t : specs) {
    const GgufTensor* gt = g.find_tensor(t.name);
    if (!gt) return make_error(ErrorCode::CorruptData, "{}: tensor {} is missing", path, t.name);
    if (gt->ne != t.ne)
      return make_error(ErrorCode::CorruptData, "{}: tensor {} has shape {}, this config needs {}",
                        path, t.name, shape_str(gt->ne), shape_str(t.ne));
    if (t.lin) {  // the file's bytes in its type, in the mapping the model keeps
      auto b = Weight::borrow(gt->type, gt->data, t.lin->out, t.lin->in);
      if (!b.ok()) return make_error(b.code(), "{}: tensor {}: {}", path, t.name, b.message());
      t.lin->w = std::move(b.value());
      continue;
    }
    KAMERA_ASSIGN_OR_RETURN(*t.vec, g.read_f32(*gt));
  }
  if (g.tensors().size() != specs.size())
    return make_error(ErrorCode::Unsupported,
                      "{}: {} tensors, a SmolVLM tower of this config has {} (kamera would ignore "
                      "the others)",
                      path, g.tensors().size(), specs.size());
  m.mapping = file->mapping();
  compute_fingerprint(m);
  return m;
}

}  // namespace kamera
