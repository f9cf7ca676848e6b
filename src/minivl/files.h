// Where the mini-VL's committed weights live, relative to the repository root (a header of its
// own: the Python binding's kamera.minivl reads it without the engine's headers).
#pragma once

namespace kamera::minivl {

inline constexpr const char* kDecoderFile = "models/minivl/minivl.gguf";
inline constexpr const char* kVisionFile = "models/minivl/minivl-mmproj.gguf";
// mini-VL v2 (docs/MINIVL.md): 16 tokens per frame, 6 decoder layers, two-frame family.
inline constexpr const char* kV2DecoderFile = "models/minivl-v2/minivl.gguf";
inline constexpr const char* kV2VisionFile = "models/minivl-v2/minivl-mmproj.gguf";

}  // namespace kamera::minivl
