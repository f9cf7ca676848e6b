// LLaVA-1.5's tower: config checks, the tensor table and the mmproj loader (llava_vision.h lists
// the keys and tensor names).
#include "vision/llava_vision.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "vision/clip_keys.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

constexpr const char* kProjector = "mlp";
constexpr const char* kLdpV2 = "ldpv2";
constexpr const char* kLdp = "ldp";
constexpr const char* kFamily = "LLaVA";
constexpr const char* kFeatureLayer = "clip.vision.feature_layer";
constexpr const char* kPinpoints = "clip.vision.image_grid_pinpoints";
constexpr const char* kMergeType = "clip.vision.mm_patch_merge_type";
constexpr int kMaxTiles = 64;  // tiles of one pinpoint

std::vector<ClipTensor> tensor_specs(const LlavaVisionConfig& c, LlavaVisionWeights& w) {
  const int64_t d = c.dim, f = c.ffn_dim, p = c.patch, o = c.out_dim;
  std::vector<ClipTensor> s;
  auto linear = [&s](const std::string& name, QwenLinear& l, int in, int out,
                     std::vector<int64_t> ne) { clip_linear(s, name, l, in, out, std::move(ne)); };
  auto vec = [&s](const std::string& name, std::vector<float>& v, std::vector<int64_t> ne) {
    clip_vector(s, name, v, std::move(ne));
  };
  vec("v.class_embd", w.cls, {d});
  w.patch.in = c.vit().patch_values(), w.patch.out = c.dim;  // CLIP's Conv2d has no bias
  s.push_back({"v.patch_embd.weight", {p, p, 3, d}, nullptr, &w.patch});
  vec("v.position_embd.weight", w.pos, {d, int64_t(c.n_patches()) + 1});
  vec("v.pre_ln.weight", w.pre_ln_w, {d});
  vec("v.pre_ln.bias", w.pre_ln_b, {d});
  w.layers.resize(size_t(c.n_layers));
  const char* fc1 = c.fc1_is_up ? "ffn_up" : "ffn_down";
  const char* fc2 = c.fc1_is_up ? "ffn_down" : "ffn_up";
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
    linear(b + fc1, L.fc1, c.dim, c.ffn_dim, {d, f});
    linear(b + fc2, L.fc2, c.ffn_dim, c.dim, {f, d});
  }
  if (c.projector == LlavaProjector::kLdp) {
    linear("mm.model.mlp.1", w.mm0, c.dim, c.out_dim, {d, o});
    linear("mm.model.mlp.3", w.mm2, c.out_dim, c.out_dim, {o, o});
    for (int k = 0; k < 2; ++k) {
      auto& B = w.ldp[k];
      const std::string b = "mm.model.mb_block." + std::to_string(k + 1) + ".block.";
      vec(b + "0.0.weight", B.dw, {3, 3, o});
      vec(b + "0.1.weight", B.ln1_w, {o});
      vec(b + "0.1.bias", B.ln1_b, {o});
      linear(b + "1.fc1", B.fc1, c.out_dim, c.ldp_squeeze, {o, c.ldp_squeeze});
      linear(b + "1.fc2", B.fc2, c.ldp_squeeze, c.out_dim, {c.ldp_squeeze, o});
      B.pw.in = B.pw.out = c.out_dim;  // the pointwise convolution has no bias
      s.push_back({b + "2.0.weight", {o, o}, nullptr, &B.pw});
      vec(b + "2.1.weight", B.ln2_w, {o});
      vec(b + "2.1.bias", B.ln2_b, {o});
    }
    return s;
  }
  if (c.projector == LlavaProjector::kLdpV2) {
    linear("mm.model.mlp.0", w.mm0, c.dim, c.out_dim, {d, o});
    linear("mm.model.mlp.2", w.mm2, c.out_dim, c.out_dim, {o, o});
    vec("mm.model.peg.0.weight", w.peg_w,
        c.peg_4d ? std::vector<int64_t>{3, 3, 1, o} : std::vector<int64_t>{3, 3, o});
    vec("mm.model.peg.0.bias", w.peg_b, {o});
    return s;
  }
  linear("mm.0", w.mm0, c.dim, c.out_dim, {d, o});
  linear("mm.2", w.mm2, c.out_dim, c.out_dim, {o, o});
  if (c.anyres()) vec(c.newline_tensor, w.newline, {o});
  return s;
}

// The feature layer: clip.vision.feature_layer's one index, else block_count - 1.
Status read_feature_layer(const GgufFile& g, const std::string& path, LlavaVisionConfig* c) {
  c->layers = c->n_layers - 1;
  if (!g.has(kFeatureLayer)) return Status::Ok();
  const std::vector<int64_t>* fl = g.get_int_array(kFeatureLayer);
  if (!fl || fl->size() != 1)
    return make_error(ErrorCode::Unsupported,
                      "{}: {} must be one index (several feature layers, as Granite Vision's, "
                      "are not supported)",
                      path, kFeatureLayer);
  if ((*fl)[0] < 1 || (*fl)[0] > c->n_layers)
    return make_error(ErrorCode::CorruptData, "{}: {} = {} outside 1 .. {}", path, kFeatureLayer,
                      (*fl)[0], c->n_layers);
  c->layers = int((*fl)[0]);
  return Status::Ok();
}

// LLaVA-1.6's pinpoints (pairs, each a multiple of image_size, at most kMaxTiles tiles) and the
// name of its newline row.
Status read_anyres(const GgufFile& g, const std::string& path, LlavaVisionConfig* c) {
  if (!g.has(kPinpoints)) return Status::Ok();
  if (c->mobilevlm())
    return make_error(ErrorCode::Unsupported, "{}: {} beside MobileVLM's projector", path,
                      kPinpoints);
  const std::vector<int64_t>* pp = g.get_int_array(kPinpoints);
  if (!pp || pp->empty() || pp->size() % 2)
    return make_error(ErrorCode::CorruptData, "{}: {} must be pairs of sizes", path, kPinpoints);
  for (size_t i = 0; i < pp->size(); i += 2) {
    const int64_t a = (*pp)[i], b = (*pp)[i + 1], t = c->image_size;
    if (a < t || b < t || a % t || b % t || (a / t) * (b / t) > kMaxTiles)
      return make_error(ErrorCode::Unsupported,
                        "{}: {}: {} x {} is not a grid of at most {} tiles of {} pixels", path,
                        kPinpoints, a, b, kMaxTiles, t);
    c->pinpoints.push_back({int(a), int(b)});
  }
  const std::string merge = g.get_string(kMergeType).value_or("spatial_unpad");
  if (merge != "spatial_unpad")
    return make_error(ErrorCode::Unsupported,
                      "{}: {} '{}': only LLaVA-1.6's spatial_unpad (the features unpadded, a "
                      "newline row after each line) is supported",
                      path, kMergeType, merge);
  for (const char* name : {"model.image_newline", "v.image_newline"})
    if (g.find_tensor(name)) c->newline_tensor = name;
  if (c->newline_tensor.empty())
    return make_error(ErrorCode::CorruptData,
                      "{}: LLaVA-1.6's grid ({}) without its newline row (model.image_newline)",
                      path, kPinpoints);
  return Status::Ok();
}

Status read_config(const GgufFile& g, const std::string& path, LlavaVisionConfig* c) {
  const std::string proj = g.get_string(gk::kClipProjectorType).value_or("");
  if (proj != kProjector && proj != kLdpV2 && proj != kLdp)
    return make_error(ErrorCode::Unsupported,
                      "{}: projector type '{}' is not LLaVA's ('mlp') nor MobileVLM's ('ldp', "
                      "'ldpv2')",
                      path, proj);
  c->projector = proj == kLdpV2 ? LlavaProjector::kLdpV2
                 : proj == kLdp ? LlavaProjector::kLdp
                                : LlavaProjector::kMlp;
  const GgufTensor* fc1 = g.find_tensor("mm.model.mb_block.1.block.1.fc1.weight");
  c->ldp_squeeze = fc1 && fc1->ne.size() == 2 ? int(fc1->ne[1]) : 0;
  if (c->projector == LlavaProjector::kLdp && (c->ldp_squeeze < 1 || c->ldp_squeeze > 65536))
    return make_error(ErrorCode::CorruptData, "{}: ldp without its squeeze-excitation (fc1)", path);
  const GgufTensor* peg = g.find_tensor("mm.model.peg.0.weight");
  c->peg_4d = peg && peg->ne.size() == 4;
  if (g.get_bool(gk::kClipUseSilu).value_or(false))
    return make_error(ErrorCode::Unsupported, "{}: clip.use_silu: LLaVA's CLIP is (quick-)GELU",
                      path);
  c->gelu_tanh = g.get_bool(gk::kClipUseGelu).value_or(false);
  KAMERA_TRY(clip_count(g, path, gk::kVisionImageSize, &c->image_size, 1, 8192));
  KAMERA_TRY(clip_count(g, path, gk::kVisionPatchSize, &c->patch, 1, 64));
  KAMERA_TRY(clip_count(g, path, gk::kVisionEmbeddingLength, &c->dim, 4, 16384));
  KAMERA_TRY(clip_count(g, path, gk::kVisionBlockCount, &c->n_layers, 1, 256));
  KAMERA_TRY(clip_count(g, path, gk::kVisionHeadCount, &c->n_heads, 1, 1024));
  KAMERA_TRY(clip_count(g, path, gk::kVisionFeedForwardLength, &c->ffn_dim, 1, 65536));
  KAMERA_TRY(clip_count(g, path, gk::kVisionProjectionDim, &c->out_dim, 1, 65536));
  c->eps = float(g.get_float(gk::kVisionLayerNormEps).value_or(c->eps));
  KAMERA_TRY(clip_mean_std(g, path, &c->image_mean, &c->image_std));
  KAMERA_TRY(read_feature_layer(g, path, c));
  KAMERA_TRY(read_anyres(g, path, c));
  // llama.cpp swaps ffn_up / ffn_down back when ffn_down reads the width (the legacy names)
  const GgufTensor* down = g.find_tensor("v.blk.0.ffn_down.weight");
  c->fc1_is_up = down && !down->ne.empty() && down->ne[0] != c->dim;
  return c->validate();
}

void compute_fingerprint(LlavaVisionModel& m) {
  const LlavaVisionConfig& c = m.cfg;
  std::vector<int> ints = {c.image_size, c.patch,   c.dim,     c.n_layers,         c.layers,
                           c.n_heads,    c.ffn_dim, c.out_dim, c.gelu_tanh ? 1 : 0};
  for (const auto& p : c.pinpoints) ints.insert(ints.end(), p.begin(), p.end());
  const char* type = c.projector == LlavaProjector::kLdpV2 ? kLdpV2
                     : c.projector == LlavaProjector::kLdp ? kLdp
                                                           : kProjector;
  const float reals[] = {c.eps,          c.image_mean[0], c.image_mean[1], c.image_mean[2],
                         c.image_std[0], c.image_std[1],  c.image_std[2]};
  m.fingerprint = clip_fingerprint(type, ints, reals, tensor_specs(m.cfg, m.w));
}

}  // namespace

Status LlavaVisionConfig::validate() const {
  auto bad = [](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "llava vision: {}", what);
  };
  if (patch < 1 || image_size < patch)
    return bad(fmt::format("pictures of {} pixels in patches of {}", image_size, patch));
  if (layers < 1 || layers > n_layers)
    return bad(fmt::format("feature layer {} of {} blocks", layers, n_layers));
  if (out_dim < 1) return bad(fmt::format("out {}", out_dim));
  if (mobilevlm() && side() % 2)
    return bad(fmt::format("MobileVLM's projector halves an odd grid of {} patches", side()));
  return validate_siglip(vit(), "llava");
}

Result<LlavaVisionModel> LlavaVisionModel::load(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  const GgufFile& g = *file;
  KAMERA_TRY(clip_vision_file(g, path));
  LlavaVisionModel m;
  m.source = path;
  KAMERA_TRY(read_config(g, path, &m.cfg));
  KAMERA_TRY(load_clip_tensors(g, path, tensor_specs(m.cfg, m.w), kFamily));
  m.mapping = file->mapping();
  compute_fingerprint(m);
  return m;
}

}  // namespace kamera
