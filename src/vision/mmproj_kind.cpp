#include "vision/mmproj_kind.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "vision/clip_keys.h"

namespace kamera {

Result<std::string> mmproj_projector_type(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto f, GgufFile::open(path));
  return clip_vision_projector(*f);
}

Result<int> mmproj_projection_dim(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto f, GgufFile::open(path));
  const auto dim = f->get_int(gguf_key::kVisionProjectionDim);
  if (!dim || *dim < 1 || *dim > 65536)
    return make_error(ErrorCode::CorruptData, "{}: no {} in [1, 65536]", path,
                      gguf_key::kVisionProjectionDim);
  return int(*dim);
}

Result<bool> mmproj_has_vision_encoder(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto f, GgufFile::open(path));
  return f->get_bool(gguf_key::kClipHasVisionEncoder).value_or(false);
}

Result<int> mmproj_audio_width(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto f, GgufFile::open(path));
  if (!f->get_bool(gguf_key::kClipHasAudioEncoder).value_or(false)) return 0;
  const auto dim = f->get_int(gguf_key::kAudioProjectionDim);
  if (!dim || *dim < 1 || *dim > 65536)
    return make_error(ErrorCode::CorruptData, "{}: no {} in [1, 65536]", path,
                      gguf_key::kAudioProjectionDim);
  return int(*dim);
}

bool is_qwen_projector(const std::string& type) {
  return type == "qwen2vl_merger" || type == "qwen2.5vl_merger" || type == "qwen3vl_merger";
}

}  // namespace kamera
