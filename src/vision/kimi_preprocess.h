// Image preprocessing of Kimi-VL, as its Hugging Face processor (KimiVLImageProcessor) does it:
//   1. an image of more than in_token_limit patches ((w / 14) * (h / 14), integer division) is
//      scaled by sqrt(limit / patches), each side truncated (Python int()), with PIL's BICUBIC
//      (media/resize.h); a smaller image keeps its size (native resolution);
//   2. pad_input: black pixels appended right and bottom to multiples of merge x patch (28);
//   3. to_tensor (v / 255 in f32) and normalize ((x - mean) / std in f32; mean = std = 0.5);
//   4. patchify: the (h / 14) x (w / 14) patches in raster order, each (channel, py, px).
// llama.cpp d32676d departs from it (docs/VISION.md): it resizes every image bilinearly to a
// multiple of 28 between 8 and 1024 merged tokens (round to nearest, so it may upscale or
// shrink a side) instead of padding. Both leave an image alone whose sides are multiples of 28
// and whose merged tokens number 8 to 1024: the towers are compared on such images.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "vision/kimi_vision.h"

namespace kamera {

struct KimiPatches {
  int grid_h = 0, grid_w = 0;  // patches
  int width = 0, height = 0;   // after the resize, before the padding
  int patch_values = 0;        // 3 x patch x patch
  std::vector<float> values;   // (grid_h * grid_w) x patch_values

  int64_t n_patches() const { return int64_t(grid_h) * grid_w; }
};

// The size step 1 gives an image of width x height (the same size when it has few patches).
Result<std::pair<int, int>> kimi_target_size(int width, int height, const KimiVisionConfig& c);

// The merged rows the tower makes of a width x height image, from its size alone (steps 1 and 2;
// what a server bounds before decoding). Errors as kimi_preprocess_image's.
Result<int64_t> kimi_picture_rows(int width, int height, const KimiVisionConfig& c);

// Steps 1 to 4. Errors: an empty image, a grid of 512 or more patches on a side (the model's
// rotary table), a side that step 1 would shrink to 0.
Result<KimiPatches> kimi_preprocess_image(const Image& image, const KimiVisionConfig& c);

}  // namespace kamera
