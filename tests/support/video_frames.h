// What the video tests share: a drawn frame, and the M-RoPE layout transformers' get_rope_index
// gives a Qwen2.5-VL / Qwen2.5-Omni video, written from the formula (not from video_time.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "media/image.h"
#include "reuse/chunk.h"

namespace video_frames {

// A w x h frame of smooth stripes, different for each seed.
inline kamera::Image frame(int w, int h, int seed) {
  kamera::Image img{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        img.rgb[(size_t(y) * w + x) * 3 + c] =
            uint8_t(128 + 100 * std::sin(0.23 * x * (c + 1) - 0.13 * y + seed));
  return img;
}

// The layout of a video of `slices` x h x w merged rows, relative to its start: slice k at
// t = trunc(k * second_per_grid * per_second) in float32, second_per_grid = temporal patch (2) /
// fps; per_second is Qwen2.5-VL's tokens_per_second (2) or Qwen2.5-Omni's
// position_id_per_seconds (25).
inline std::vector<kamera::Pos> hf_layout(int slices, int h, int w, double fps,
                                          float per_second = 2.0f) {
  const float second_per_grid = float(2.0 / fps);
  std::vector<kamera::Pos> out;
  for (int k = 0; k < slices; ++k)
    for (int r = 0; r < h; ++r)
      for (int c = 0; c < w; ++c)
        out.push_back({int32_t(float(k) * second_per_grid * per_second), r, c});
  return out;
}

}  // namespace video_frames
