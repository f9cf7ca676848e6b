// Gemma 3 pictures as position-free chunks: one picture per chunk, its rows() tower rows on linear
// positions 0..n-1 (the gemma3 decoder's rope is 1-D), so a picture relocates, is patched and
// windowed like a text chunk. The prompt writes <start_of_image> before and <end_of_image> after
// the rows, as llama.cpp's mtmd places them (Hugging Face's processor also writes "\n\n" on both
// sides: docs/VISION.md).
//
// A picture's key is XXH3-128 of its pixels (width, height, RGB bytes) and both models'
// fingerprints; the key names the placed chunk, kept in an LRU and, with a store (set_store),
// looked up in and written through to the store's image entries (vision/picture_lru.h).
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "media/image.h"
#include "model/model.h"
#include "reuse/chunk.h"
#include "vision/gemma3_encoder.h"
#include "vision/picture_lru.h"
#include "vision/vl_prompt.h"

namespace kamera {

class ThreadPool;
class ChunkStore;

inline constexpr std::string_view kStartOfImage = "<start_of_image>";
inline constexpr std::string_view kEndOfImage = "<end_of_image>";

// <start_of_image> / <end_of_image> in `tok`'s vocabulary (empty if either is missing).
VisionDelimiters gemma3_delimiters(const Tokenizer* tok);

// Whether the tower's rows go into `decoder`: a gemma3 decoder of the tower's projected width
// whose vocabulary has the two delimiters.
Status check_gemma3_pair(const Gemma3VisionConfig& tower, const Model& decoder,
                         const std::string& mmproj);

// The encoded, placed chunks of pictures by key (vision/picture_lru.h). Not thread-safe.
class Gemma3ImageChunks {
 public:
  Gemma3ImageChunks(const Gemma3VisionModel& tower, const std::array<uint64_t, 2>& decoder_fp,
                    ThreadPool* pool, size_t max_entries = 64);

  void set_store(ChunkStore* store) { lru_.set_store(store); }
  void set_stop(std::function<bool()> stop) { enc_.set_stop(std::move(stop)); }

  // Rows a picture takes in the prompt: rows() whatever its size (it is resized).
  int64_t rows() const { return tower_.cfg.rows(); }
  // One picture. encoded (optional): whether this call ran the tower.
  Result<std::shared_ptr<const ChunkContent>> image(const Image& img, bool* encoded = nullptr);

  using Stats = PictureLru::Stats;
  const Stats& stats() const { return lru_.stats(); }

 private:
  const Gemma3VisionModel& tower_;
  std::array<uint64_t, 2> decoder_fp_;
  Gemma3VisionEncoder enc_;
  PictureLru lru_;
};

}  // namespace kamera
