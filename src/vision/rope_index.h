// Where an image's embedding rows sit in the decoder, as Qwen2-VL's get_rope_index places them
// (transformers' Qwen2VLForConditionalGeneration): a prompt is a run of pieces, text token runs
// and images, each starting at the position one past the largest component used so far.
//
//   text  "...<|vision_start|>" : t = h = w = p, p + 1, ... (1-D, as any text)
//   image (T x H x W merged)     : row (t, r, c) at (s + t, s + r, s + c), s = the piece's start
//   text  "<|vision_end|>..."   : continues at s + max(T, H, W) (max component + 1)
//
// An image has T = 1 (its frame fills both halves of the temporal patch); a video of 2k frames has
// T = k, so its t advances once per temporal patch (Qwen2-VL; Qwen2.5-VL scales t by
// seconds: vision/video_time.h). The layout of a piece is position-free (relative to its start): a
// placed image is a ChunkContent, the unit the reuse layer caches and relocates.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/pos.h"
#include "core/status.h"
#include "model/forward.h"
#include "reuse/chunk.h"
#include "vision/qwen_vision_encoder.h"

namespace kamera {

// The image's rows (T*H*W x dim, raster order per temporal slice) with layout (t, r, c).
ChunkContent image_chunk(const QwenVisionEmbeddings& e);
ChunkContent image_chunk(QwenVisionEmbeddings&& e);

// Absolute positions of each piece when the first starts at `start`; *next (optional) receives
// where a token after the last piece goes.
std::vector<std::vector<Pos>> place_pieces(std::span<const ChunkContent> pieces, int32_t start,
                                           int32_t* next = nullptr);

// Prefills the pieces, in order, into `seq` (appended; positions from place_pieces at `start`),
// one forward per piece (the attention is causal over every row, image rows included, as the
// Hugging Face decoder is; a Gemma 3 decoder's picture rows see each other, as in the chunk cache:
// picture_rows). Returns the logits the last piece's forward gives under `logits`.
Result<std::vector<float>> prefill_pieces(Engine& engine, KvPool& pool, SeqId seq,
                                          std::span<const ChunkContent> pieces, int32_t start,
                                          LogitsMode logits, int32_t* next = nullptr);

}  // namespace kamera
