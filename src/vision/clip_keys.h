// The keys every mmproj (llama.cpp's "clip" file) loader reads alike: a required count, the
// processor's mean and standard deviation. Used by the Qwen-VL, Kimi-VL, SmolVLM and Gemma 3
// loaders.
#pragma once

#include <array>
#include <string>

#include "core/status.h"

namespace kamera {

class GgufFile;

// general.architecture is "clip" and the file has a vision encoder (CorruptData otherwise).
Status clip_vision_file(const GgufFile& g, const std::string& path);

// The vision tower's projector type: clip.projector_type, else (a file of two towers, as
// llama.cpp's converter writes Qwen3-Omni's) clip.vision.projector_type, as llama.cpp's clip
// loader reads a file's vision half; "" when the file names neither.
std::string clip_vision_projector(const GgufFile& g);

// A required integer key in [lo, hi] (CorruptData naming path and key otherwise).
Status clip_count(const GgufFile& g, const std::string& path, const char* key, int* out, int lo,
                  int hi);

// clip.vision.image_mean / image_std where the file has them (three values each), else left as
// they are.
Status clip_mean_std(const GgufFile& g, const std::string& path, std::array<float, 3>* mean,
                     std::array<float, 3>* std);

// The keys every ViT tower with a GELU (tanh) MLP reads alike (the Kimi-VL, SmolVLM and Gemma 3
// loaders). The fields hold the caller's defaults; read_clip_common overwrites them.
struct ClipCommon {
  int patch = 0, dim = 0, n_layers = 0, n_heads = 0, ffn_dim = 0, out_dim = 0;
  float eps = 1e-6f;  // clip.vision.attention.layer_norm_epsilon where the file has it
  std::array<float, 3> image_mean{}, image_std{};
};

// clip.projector_type must be `projector` (Unsupported naming `family` otherwise) and
// clip.use_gelu not false; then patch size, width, blocks, heads, feed-forward and projection
// widths (required), the layer-norm epsilon, mean and std (clip_mean_std).
Status read_clip_common(const GgufFile& g, const std::string& path, const char* projector,
                        const char* family, ClipCommon* c);

}  // namespace kamera
