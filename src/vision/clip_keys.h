// The keys every mmproj (llama.cpp's "clip" file) loader reads alike: a required count, the
// processor's mean and standard deviation. Used by the Qwen-VL, Kimi-VL and SmolVLM loaders.
#pragma once

#include <array>
#include <string>

#include "core/status.h"

namespace kamera {

class GgufFile;

// general.architecture is "clip" and the file has a vision encoder (CorruptData otherwise).
Status clip_vision_file(const GgufFile& g, const std::string& path);

// A required integer key in [lo, hi] (CorruptData naming path and key otherwise).
Status clip_count(const GgufFile& g, const std::string& path, const char* key, int* out, int lo,
                  int hi);

// clip.vision.image_mean / image_std where the file has them (three values each), else left as
// they are.
Status clip_mean_std(const GgufFile& g, const std::string& path, std::array<float, 3>* mean,
                     std::array<float, 3>* std);

}  // namespace kamera
