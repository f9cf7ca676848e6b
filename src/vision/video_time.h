// Qwen2.5-VL's time scaling of video positions (transformers' Qwen2_5_VLForConditionalGeneration
// get_rope_index): the M-RoPE t of a video's temporal slice k is not k (as in Qwen2-VL,
// rope_index.h) but
//
//   t_k = (int64) trunc( f32( f32(k * second_per_grid_t) * tokens_per_second ) )
//
// where second_per_grid_t = temporal_patch / fps (the seconds one temporal patch spans: the
// processor's second_per_grid_ts, 2 / fps for sampled frames) and tokens_per_second is the
// vision config's (2 for the released Qwen2.5-VL models). HF computes it in float32 tensors
// (the int64 index times a float32 scalar) and truncates with .long(); so does this. h and w are
// unchanged, and text after the video continues at max(t, h, w) + 1 as for any piece.
//
// llama.cpp's mmproj (c392e50) has no key for tokens_per_second (its Qwen2.5-VL path has no
// video time scaling), so kamera does not read one from the GGUF: the caller passes it
// (kDefaultTokensPerSecond unless the model's config.json says otherwise).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "reuse/chunk.h"
#include "vision/qwen_vision_encoder.h"

namespace kamera {

inline constexpr double kDefaultTokensPerSecond = 2.0;
// Qwen2.5-Omni's thinker times its video slices the same way at position_id_per_seconds = 25
// (Qwen2_5OmniThinkerConfig's default; get_rope_index: trunc(k * second_per_grid * 25), f32), with
// second_per_grid = temporal_patch / fps from its processor (fps 2 by default), so an Omni file's
// vision half uses this as its tokens_per_second.
inline constexpr double kOmniPositionsPerSecond = 25.0;
// The processor's frame rate when the caller names none (Qwen2_5_VLProcessor's fps = 2.0):
// second_per_grid_t = temporal_patch / 2 = 1 second per temporal patch.
inline constexpr double kDefaultVideoFps = 2.0;

struct VideoTime {
  double second_per_grid_t = 1.0;  // temporal_patch / fps
  double tokens_per_second = kDefaultTokensPerSecond;
  static VideoTime from_fps(double fps, int temporal_patch = 2,
                            double tokens_per_second = kDefaultTokensPerSecond) {
    return {temporal_patch / fps, tokens_per_second};
  }
};

// t of temporal slice k (the formula above).
int32_t video_t(int k, const VideoTime& vt);

// A video's rows (grid_t x grid_h x grid_w, raster order per slice) placed for Qwen2.5-VL:
// layout (t_k, row, col). Errors: a non-positive or non-finite scale, a t beyond 2^24.
Result<ChunkContent> video_chunk(const QwenVisionEmbeddings& e, const VideoTime& vt);

// The same from a video placed with Qwen2-VL's rule (image_chunk: t = slice index k): every row's
// t becomes video_t(k); rows, h and w are kept. video_chunk(e, vt) == retime_video(image_chunk(e)).
Result<ChunkContent> retime_video(const ChunkContent& placed, const VideoTime& vt);

}  // namespace kamera
