// Qwen3-VL's video placement (transformers' Qwen3VLProcessor and Qwen3VLModel.get_rope_index):
// time is written as text, not as the M-RoPE t. The frames are paired in time as for any Qwen-VL
// tower (temporal patch 2); pair k gets the timestamp
//
//   ts_k = (idx[2k] / fps + idx[2k + 1] / fps) / 2    (an odd count repeats the last index)
//
// where idx are the sampled frames' indices in the source video and fps its frame rate
// (_calculate_timestamps), and the prompt's "<|vision_start|><|video_pad|><|vision_end|>" becomes
//
//   "<{ts_0:.1f} seconds><|vision_start|>[pair 0 rows]<|vision_end|><{ts_1:.1f} seconds>..."
//
// Each pair's rows are placed as one image (t = its start for every row, h and w its grid,
// rope_index.h) and the text after it continues at start + max(h, w): get_rope_index splits the
// video's grid (T, H, W) into T grids (1, H, W). So every pair is a chunk of its own, cached and
// relocated like an image, and the timestamps are text chunks between them; the window can slide
// over pairs.
//
// llama.cpp (d32676d, mtmd-helper's video reader) differs: it merges consecutive frames into one
// (T = 2) bitmap pair per chunk and writes its own "[XmY.YYs]" text at fixed intervals. kamera
// follows Hugging Face.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "reuse/chunk.h"
#include "tokenizer/tokenizer.h"
#include "vision/qwen_vision_encoder.h"

namespace kamera {

// Timestamps of the temporal pairs of frames sampled at `indices` from a video of `fps` frames
// per second. Errors: no indices, a non-positive or non-finite fps.
Result<std::vector<double>> qwen3vl_timestamps(std::span<const int> indices, double fps,
                                               int temporal_patch = 2);
// "<0.2 seconds>": the text before a pair (Python's f"<{t:.1f} seconds>").
std::string qwen3vl_timestamp_text(double seconds);
// The pieces of a video (rows of grid_t pairs, as the tower encodes them) for a prompt's video:
// text and one image chunk per pair, as above. The caller's text runs go before and after.
// Errors: a timestamp count other than grid_t, a vocabulary without the vision delimiters.
Result<std::vector<ChunkContent>> qwen3vl_video_pieces(const Tokenizer& tok,
                                                       const QwenVisionEmbeddings& video,
                                                       std::span<const double> timestamps);

}  // namespace kamera
