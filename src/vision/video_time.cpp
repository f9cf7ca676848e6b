#include "vision/video_time.h"

#include <cmath>

namespace kamera {

int32_t video_t(int k, const VideoTime& vt) {
  const float step = float(k) * float(vt.second_per_grid_t);  // int64 x float32 -> float32
  const float t = step * float(vt.tokens_per_second);
  return int32_t(std::trunc(t));  // .long()
}

namespace {

// The scale is positive and finite, and the last of grid_t slices lands below 2^24.
Status check_video_time(int grid_t, const VideoTime& vt) {
  if (!(vt.second_per_grid_t > 0) || !(vt.tokens_per_second > 0) ||
      !std::isfinite(vt.second_per_grid_t) || !std::isfinite(vt.tokens_per_second))
    return make_error(ErrorCode::InvalidArgument,
                      "video time: second_per_grid_t {} and tokens_per_second {} must be positive",
                      vt.second_per_grid_t, vt.tokens_per_second);
  const double last = double(std::max(0, grid_t - 1)) * vt.second_per_grid_t * vt.tokens_per_second;
  if (last > double(1 << 24))
    return make_error(ErrorCode::InvalidArgument,
                      "video time: slice {} lands at t = {:.0f}, beyond 2^24", grid_t - 1, last);
  return Status::Ok();
}

}  // namespace

Result<ChunkContent> video_chunk(const QwenVisionEmbeddings& e, const VideoTime& vt) {
  KAMERA_TRY(check_video_time(e.grid_t, vt));
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

Result<ChunkContent> retime_video(const ChunkContent& placed, const VideoTime& vt) {
  if (!placed.tokens.empty())
    return make_error(ErrorCode::InvalidArgument,
                      "video time: the chunk holds tokens, not a video");
  int32_t slices = 0;
  for (const Pos& p : placed.layout) {
    if (p.t < 0 || p.t >= (1 << 24))
      return make_error(ErrorCode::InvalidArgument, "video time: slice index {} out of range", p.t);
    slices = std::max(slices, p.t + 1);
  }
  KAMERA_TRY(check_video_time(slices, vt));
  ChunkContent c = placed;
  for (Pos& p : c.layout) p.t = video_t(p.t, vt);
  return c;
}

}  // namespace kamera
