// InternVL's tiles of a picture as its processor cuts them (the model card's dynamic_preprocess
// and build_transform, which InternVL 2.5 / 3's chat code runs):
//   grid    among the (cols, rows) with min_tiles <= cols * rows <= max_tiles, sorted by
//           cols * rows, the one whose cols / rows is nearest the picture's width / height; on
//           an equal distance a later (larger) grid wins when the picture's area exceeds half
//           of the grid's pixels (image_size^2 * cols * rows / 2)
//   tiles   the picture resized to (cols * image_size) x (rows * image_size) with PIL's BICUBIC
//           (media/resize.h), cut into cols * rows tiles, row by row
//   thumb   with more than one tile, the whole picture resized to image_size x image_size
//           (BICUBIC) as the last tile
// Each tile is then read by the tower as it is (its transform's resize to image_size is the
// identity on it). llama.cpp's mtmd cuts with its own slicer (llava-uhd's grid search and its
// own resize), so pictures that are not one tile of the tower's size may differ
// (docs/VISION.md).
#pragma once

#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "vision/internvl_vision.h"

namespace kamera {

struct InternvlGrid {
  int cols = 1, rows = 1;
};

// The grid for a picture of width x height (each >= 1).
InternvlGrid internvl_grid(int width, int height, const InternvlVisionConfig& c);

// The tiles (and the thumbnail) of a picture, in the order the tower's rows follow one another.
Result<std::vector<Image>> internvl_tiles(const Image& img, const InternvlVisionConfig& c);

}  // namespace kamera
