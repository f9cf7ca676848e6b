// Which tower an mmproj GGUF holds: its clip.projector_type ("qwen2vl_merger",
// "qwen2.5vl_merger", "qwen3vl_merger", "kimivl", "idefics3", "gemma3", "internvl",
// "mlp" (LLaVA-1.5), "kamera-minivl"; else Qwen3-Omni's clip.vision.projector_type; "" for none).
// The callers that pick a loader by it: the server's tower (vision/media_tower.h), the C API's
// kamera_vision_load and `kamera vision-embed`.
#pragma once

#include <string>

#include "core/status.h"

namespace kamera {

Result<std::string> mmproj_projector_type(const std::string& path);

// The width the tower projects to (clip.vision.projection_dim: the decoder's width), read from
// the file's keys without loading the tower. Errors: no such key (CorruptData).
Result<int> mmproj_projection_dim(const std::string& path);

// Whether the file says it holds a vision tower (clip.has_vision_encoder; absent: false, as
// llama.cpp's clip reads it). A Qwen2.5-Omni file holds one beside its audio tower.
Result<bool> mmproj_has_vision_encoder(const std::string& path);

// The width an audio tower projects to (clip.audio.projection_dim) when the file holds one
// (clip.has_audio_encoder: Qwen2.5-Omni's, Qwen2-Audio's, any audio tower llama.cpp's converter
// writes), 0 when it holds none. Errors: an audio encoder without that key (CorruptData).
Result<int> mmproj_audio_width(const std::string& path);

// A Qwen2-VL / Qwen2.5-VL / Qwen3-VL projector type (vision/qwen_vision.h).
bool is_qwen_projector(const std::string& type);

}  // namespace kamera
