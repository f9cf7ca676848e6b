#include "vision/internvl_preprocess.h"

#include <algorithm>
#include <cmath>

#include "media/resize.h"

namespace kamera {

InternvlGrid internvl_grid(int width, int height, const InternvlVisionConfig& c) {
  std::vector<InternvlGrid> grids;
  for (int cols = 1; cols <= c.max_tiles; ++cols)
    for (int rows = 1; rows <= c.max_tiles; ++rows)
      if (cols * rows >= c.min_tiles && cols * rows <= c.max_tiles) grids.push_back({cols, rows});
  std::stable_sort(grids.begin(), grids.end(), [](const InternvlGrid& a, const InternvlGrid& b) {
    return a.cols * a.rows < b.cols * b.rows;
  });
  const double aspect = double(width) / double(height);
  const double area = double(width) * double(height);
  const double tile = double(c.image_size) * double(c.image_size);
  double best_diff = INFINITY;
  InternvlGrid best;
  for (const InternvlGrid& g : grids) {
    const double diff = std::fabs(aspect - double(g.cols) / double(g.rows));
    if (diff < best_diff) {
      best_diff = diff;
      best = g;
    } else if (diff == best_diff && area > 0.5 * tile * g.cols * g.rows) {
      best = g;
    }
  }
  return best;
}

Result<std::vector<Image>> internvl_tiles(const Image& img, const InternvlVisionConfig& c) {
  if (img.width < 1 || img.height < 1)
    return make_error(ErrorCode::InvalidArgument, "internvl: an empty picture");
  const InternvlGrid g = internvl_grid(img.width, img.height, c);
  const int s = c.image_size;
  KAMERA_ASSIGN_OR_RETURN(const Image big, resize_bicubic(img, g.cols * s, g.rows * s));
  std::vector<Image> out;
  for (int r = 0; r < g.rows; ++r)
    for (int col = 0; col < g.cols; ++col) {
      KAMERA_ASSIGN_OR_RETURN(Image t, crop_image(big, col * s, r * s, s, s));
      out.push_back(std::move(t));
    }
  if (out.size() > 1) {
    KAMERA_ASSIGN_OR_RETURN(Image thumb, resize_bicubic(img, s, s));
    out.push_back(std::move(thumb));
  }
  return out;
}

}  // namespace kamera
