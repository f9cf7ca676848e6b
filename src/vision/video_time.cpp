#include "vision/video_time.h"

#include <cmath>

namespace kamera {

int32_t video_t(int k, const VideoTime& vt) {
  const float step = float(k) * float(vt.second_per_grid_t);  // int64 x float32 -> float32
  const float t = step * float(vt.tokens_per_second);
  return int32_t(std::trunc(t));  // .long()
}

Result<ChunkContent> place_video(const QwenVisionEmbeddings& e, const VideoTime& vt) {
  if (!(vt.second_per_grid_t > 0) || !(vt.tokens_per_second > 0) ||
      !std::isfinite(vt.second_per_grid_t) || !std::isfinite(vt.tokens_per_second))
    return make_error(ErrorCode::InvalidArgument,
                      "video time: second_per_grid_t {} and tokens_per_second {} must be positive",
                      vt.second_per_grid_t, vt.tokens_per_second);
  const double last =
      double(std::max(0, e.grid_t - 1)) * vt.second_per_grid_t * vt.tokens_per_second;
  if (last > double(1 << 24))
    return make_error(ErrorCode::InvalidArgument,
                      "video time: slice {} lands at t = {:.0f}, beyond 2^24", e.grid_t - 1, last);
  ChunkContent c;
  c.dim = e.dim;
  c.embeddings = e.rows;
  c.layout.reserve(size_t(e.n_rows()));
  for (int k = 0; k < e.grid_t; ++k) {
    const int32_t t = video_t(k, vt);
    for (int r = 0; r < e.grid_h; ++r)
      for (int col = 0; col < e.grid_w; ++col) c.layout.push_back(Pos{t, r, col});
  }
  return c;
}

}  // namespace kamera
