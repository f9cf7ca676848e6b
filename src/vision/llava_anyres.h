// LLaVA-1.6's any-resolution grid (LLaVA-NeXT), as Hugging Face's LlavaNextImageProcessor and
// LlavaNextForConditionalGeneration compute it, and llama.cpp d32676d's departure from it.
//
// Hugging Face (kamera's default):
//   best     the pinpoint (read as (height, width)) that keeps the most of the picture's pixels
//            when the picture is scaled to fit it (min(w * s, h * s) truncated; effective = min of
//            that area and the picture's), the least wasted area breaking ties, the first in the
//            file's order after that (select_best_resolution)
//   refined  the picture resized (PIL BICUBIC) to fit the pinpoint, the other side
//            min(ceil(side * scale), pinpoint's), then centred on black (offset floor(gap / 2))
//   tiles    the refined picture cut into image_size squares, row by row
//   base     the picture stretched to image_size x image_size (PIL BICUBIC)
//   rows     the base's side^2 rows; then the tiles' rows laid out as one (rows * side) x
//            (cols * side) grid of features, cut to the picture's aspect (unpad_image: the
//            padded band of rows or columns dropped, floor((current - round(orig * scale)) / 2)
//            from each end), each line of it followed by the newline row
// llama.cpp d32676d departs (docs/VISION.md; mtmd's llava-uhd preprocessor with pinpoints): a
// picture no larger than image_size both ways is its overview only; else the tiles of the
// pinpoint chosen reading pairs as (width, height), each a chunk of side^2 rows, then the overview
// (the picture stretched with its corner-aligned bilinear); no unpadding, no newline row (the
// file's model.image_newline is not read).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "vision/llava_vision.h"

namespace kamera {

struct LlavaAnyresPlan {
  int best_w = 0, best_h = 0;  // the chosen pinpoint
  int resized_w = 0, resized_h = 0, paste_x = 0, paste_y = 0;
  int grid_rows = 0, grid_cols = 0;
  int r0 = 0, r1 = 0, c0 = 0, c1 = 0;  // the unpadded box of the grid's features
  int tiles() const { return grid_rows * grid_cols; }
  // the base's rows, then (r1 - r0) lines of (c1 - c0) features and a newline row each
  int64_t rows(int side) const { return int64_t(side) * side + int64_t(r1 - r0) * (c1 - c0 + 1); }
};

// Hugging Face's plan for a picture of width x height (c.anyres() must hold).
Result<LlavaAnyresPlan> llava_anyres_plan(int width, int height, const LlavaVisionConfig& c);

// The base image, then the tiles row by row (Hugging Face's get_image_patches).
Result<std::vector<Image>> llava_anyres_pictures(const Image& img, const LlavaAnyresPlan& p,
                                                 const LlavaVisionConfig& c);

// The picture's rows from each of its pictures' side^2 encoded rows (the base first).
std::vector<float> llava_anyres_pack(const std::vector<std::vector<float>>& encoded,
                                     const LlavaAnyresPlan& p, const LlavaVisionConfig& c,
                                     const std::vector<float>& newline);

}  // namespace kamera
