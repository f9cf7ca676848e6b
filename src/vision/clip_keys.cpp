#include "vision/clip_keys.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"

namespace kamera {

Status clip_vision_file(const GgufFile& g, const std::string& path) {
  if (g.get_string(gguf_key::kArchitecture).value_or("") != "clip")
    return make_error(ErrorCode::CorruptData, "{}: not an mmproj file ({} is not 'clip')", path,
                      gguf_key::kArchitecture);
  if (!g.get_bool(gguf_key::kClipHasVisionEncoder).value_or(true))
    return make_error(ErrorCode::CorruptData, "{}: the file has no vision encoder", path);
  return Status::Ok();
}

std::string clip_vision_projector(const GgufFile& g) {
  // the vision half's type in a file of two towers (Qwen3-Omni's: llama.cpp's converter writes
  // the audio half's as clip.audio.projector_type)
  constexpr const char* kVisionProjectorType = "clip.vision.projector_type";
  const std::string proj = g.get_string(gguf_key::kClipProjectorType).value_or("");
  return proj.empty() ? g.get_string(kVisionProjectorType).value_or("") : proj;
}

Status clip_count(const GgufFile& g, const std::string& path, const char* key, int* out, int lo,
                  int hi) {
  auto v = g.get_int(key);
  if (!v) return make_error(ErrorCode::CorruptData, "{}: missing key {}", path, key);
  if (*v < lo || *v > hi)
    return make_error(ErrorCode::CorruptData, "{}: {} is {}, outside [{}, {}]", path, key, *v, lo,
                      hi);
  *out = int(*v);
  return Status::Ok();
}

Status clip_mean_std(const GgufFile& g, const std::string& path, std::array<float, 3>* mean,
                     std::array<float, 3>* std) {
  for (auto [key, dst] :
       {std::pair{gguf_key::kVisionImageMean, mean}, std::pair{gguf_key::kVisionImageStd, std}}) {
    const std::vector<double>* a = g.get_float_array(key);
    if (!a) continue;
    if (a->size() != 3)
      return make_error(ErrorCode::CorruptData, "{}: {} has {} values, not 3", path, key,
                        a->size());
    for (int i = 0; i < 3; ++i) (*dst)[size_t(i)] = float((*a)[size_t(i)]);
  }
  return Status::Ok();
}

Status read_clip_common(const GgufFile& g, const std::string& path, const char* projector,
                        const char* family, ClipCommon* c) {
  namespace gk = gguf_key;
  const std::string proj = clip_vision_projector(g);
  if (proj != projector)
    return make_error(ErrorCode::Unsupported, "{}: projector type '{}' is not {}'s ('{}')", path,
                      proj, family, projector);
  if (!g.get_bool(gk::kClipUseGelu).value_or(true))
    return make_error(ErrorCode::Unsupported,
                      "{}: clip.use_gelu = false: {}'s MLP is GELU (tanh form)", path, family);
  KAMERA_TRY(clip_count(g, path, gk::kVisionPatchSize, &c->patch, 1, 64));
  KAMERA_TRY(clip_count(g, path, gk::kVisionEmbeddingLength, &c->dim, 4, 16384));
  KAMERA_TRY(clip_count(g, path, gk::kVisionBlockCount, &c->n_layers, 0, 256));
  KAMERA_TRY(clip_count(g, path, gk::kVisionHeadCount, &c->n_heads, 1, 1024));
  KAMERA_TRY(clip_count(g, path, gk::kVisionFeedForwardLength, &c->ffn_dim, 1, 65536));
  KAMERA_TRY(clip_count(g, path, gk::kVisionProjectionDim, &c->out_dim, 1, 65536));
  c->eps = float(g.get_float(gk::kVisionLayerNormEps).value_or(c->eps));
  return clip_mean_std(g, path, &c->image_mean, &c->image_std);
}

}  // namespace kamera
