#include "vision/idefics3_encoder.h"

#include <algorithm>

namespace kamera {

Result<std::vector<float>> Idefics3VisionEncoder::encode(const Image& tile) {
  const Idefics3VisionConfig& c = m_.cfg;
  KAMERA_ASSIGN_OR_RETURN(const std::vector<float> x, vit_.encode(tile, stop_, "idefics3"));
  const int d = c.dim, side = c.side(), s = c.scale;
  // pixel shuffle: block (ty, tx) -> one row, patch (dy, dx) at offset (dy s + dx) d
  const int bs = side / s, rows = bs * bs, mw = c.merged_width();
  merged_.resize(size_t(rows) * mw);
  for (int ty = 0; ty < bs; ++ty)
    for (int tx = 0; tx < bs; ++tx)
      for (int dy = 0; dy < s; ++dy)
        for (int dx = 0; dx < s; ++dx) {
          const float* src = x.data() + (size_t(ty * s + dy) * side + tx * s + dx) * d;
          std::copy(src, src + d,
                    merged_.data() + (size_t(ty) * bs + tx) * mw + size_t(dy * s + dx) * d);
        }
  std::vector<float> out(size_t(rows) * c.out_dim);
  m_.w.proj.apply(merged_.data(), rows, out.data(), pool_);
  return out;
}

}  // namespace kamera
