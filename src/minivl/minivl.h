// The mini vision-language model: a vision encoder (vision/encoder.h) and a Qwen2-VL-shaped
// decoder (GGUF architecture qwen2vl: GQA, M-RoPE), in two files as llama.cpp splits them
// (decoder GGUF + mmproj GGUF). A clip is a sequence of frame chunks, each the encoder's token
// rows with an (h, w) grid layout and one t; text tokens (the question) follow the last frame.
//
//   sequence  [<bos>][frame 0][frame 1]...[frame F-1][question words] -> answer word
//   positions <bos> at 0; frame f at p_f = 1 + f * token_grid: t = p_f, h = p_f + row,
//             w = p_f + col; text continues at 1 + F * token_grid with t = h = w.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "minivl/clips.h"
#include "minivl/files.h"
#include "model/forward.h"
#include "model/model.h"
#include "reuse/chunk.h"
#include "synthetic/synthetic_model.h"
#include "vision/encoder.h"

namespace kamera::minivl {

// The shapes the project trains (docs/MINIVL.md).
ModelConfig decoder_config();
VisionConfig vision_config();

// The decoder's vocabulary: words() as SentencePiece-style pieces, padded to kVocabSize.
Tokenizer::Vocab word_vocab();

struct MiniVl {
  std::shared_ptr<const Model> decoder;
  VisionModel vision;

  // Loads both files; checks that they fit together (the encoder's output width is the
  // decoder's width, the decoder is qwen2vl with the word vocabulary).
  static Result<MiniVl> load(const std::string& decoder_path, const std::string& vision_path);
};

// Writes a seeded random-weight pair of files with the trained shapes (tests, benchmarks).
Status write_random_minivl(const std::string& decoder_path, const std::string& vision_path,
                           uint64_t seed);

// A run of word ids as a text chunk (layout 0..n-1).
ChunkContent text_chunk(const std::vector<int32_t>& ids);

// Position where frame f starts, and where the text after F frames starts.
int32_t frame_start(int f, int token_grid);

// Re-prefill of [<bos>, frames..., question] in a fresh sequence of `pool` (freed afterwards):
// the logits of the question's last token (n_vocab), or of every position (T x n_vocab) when
// `all_positions`.
Result<std::vector<float>> clip_logits(Engine& engine, KvPool& pool,
                                       const std::vector<ChunkContent>& frames,
                                       const std::vector<int32_t>& question, bool all_positions);

}  // namespace kamera::minivl
