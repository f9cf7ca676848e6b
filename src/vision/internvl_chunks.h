// InternVL pictures as position-free chunks: one picture per chunk, the rows of its tiles (and
// thumbnail, vision/internvl_preprocess.h) one after another on linear positions 0..n-1 (the
// qwen2 / qwen3 decoder's rope is 1-D), so a picture relocates, is patched and windowed like a
// text chunk. The prompt writes <img> before and </img> after the rows, as llama.cpp's mtmd places
// them (Hugging Face's chat code writes <IMG_CONTEXT> tokens between the two and replaces their
// embeddings: the same rows on the same positions).
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
#include "vision/internvl_encoder.h"
#include "vision/picture_lru.h"
#include "vision/vl_prompt.h"

namespace kamera {

class ThreadPool;
class ChunkStore;

inline constexpr std::string_view kInternvlImgOpen = "<img>";
inline constexpr std::string_view kInternvlImgClose = "</img>";

// <img> / </img> in `tok`'s vocabulary (empty if either is missing).
VisionDelimiters internvl_delimiters(const Tokenizer* tok);

// Whether the tower's rows go into `decoder`: a qwen2 or qwen3 decoder of the tower's projected
// width whose vocabulary has the two delimiters.
Status check_internvl_pair(const InternvlVisionConfig& tower, const Model& decoder,
                           const std::string& mmproj);

// Rows a picture of width x height takes: rows() per tile, thumbnail included.
int64_t internvl_picture_rows(int width, int height, const InternvlVisionConfig& c);

// The encoded, placed chunks of pictures by key (vision/picture_lru.h). Not thread-safe.
class InternvlImageChunks {
 public:
  InternvlImageChunks(const InternvlVisionModel& tower, const std::array<uint64_t, 2>& decoder_fp,
                      ThreadPool* pool, size_t max_entries = 64);

  void set_store(ChunkStore* store) { lru_.set_store(store); }
  void set_stop(std::function<bool()> stop) { enc_.set_stop(std::move(stop)); }

  // One picture. encoded (optional): whether this call ran the tower.
  Result<std::shared_ptr<const ChunkContent>> image(const Image& img, bool* encoded = nullptr);

  using Stats = PictureLru::Stats;
  const Stats& stats() const { return lru_.stats(); }

 private:
  const InternvlVisionModel& tower_;
  std::array<uint64_t, 2> decoder_fp_;
  InternvlVisionEncoder enc_;
  PictureLru lru_;
};

}  // namespace kamera
