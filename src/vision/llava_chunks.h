// LLaVA-1.5 pictures as position-free chunks: one picture per chunk, its rows() rows on linear
// positions 0..n-1 (the llama decoder's rope is 1-D), so a picture relocates, is patched and
// windowed like a text chunk. No token stands before or after the rows, as llama.cpp's mtmd
// places them (the chat template writes `<image>` where Hugging Face's processor expands it to
// the rows).
//
// The picture first becomes a square of image_size (llava_square): padded to a square with
// CLIP's mean colour (122, 116, 104), the picture in the middle (LLaVA's expand2square, Hugging
// Face's LlavaImageProcessor do_pad), then resized bicubically. llama.cpp resizes first to fit,
// then pads (docs/VISION.md); a picture of image_size x image_size is read as is by all of them.
//
// LLaVA-1.6 (a tower with image_grid_pinpoints): the picture is its base image and its tiles of
// the best-fit grid, each through the tower, the tiles' rows unpadded with a newline row after
// each line (vision/llava_anyres.h); still one chunk of rows on linear positions, no token
// between its parts (llama.cpp's mtmd places LLaVA-1.6's tiles and overview, its own way, as
// consecutive image chunks with nothing between them).
//
// A picture's key is XXH3-128 of its pixels and both models' fingerprints (vision/picture_lru.h).
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "media/image.h"
#include "model/model.h"
#include "reuse/chunk.h"
#include "vision/llava_encoder.h"
#include "vision/picture_lru.h"

namespace kamera {

class ThreadPool;
class ChunkStore;

// Whether the tower's rows go into `decoder`: a llama decoder of the tower's projected width.
Status check_llava_pair(const LlavaVisionConfig& tower, const Model& decoder,
                        const std::string& mmproj);

// The picture as the tower's square (above).
Result<Image> llava_square(const Image& img, const LlavaVisionConfig& c);

// The rows of a picture of width x height (LLaVA-1.6: as Hugging Face's LLaVA-NeXT lays them out).
Result<int64_t> llava_picture_rows(int width, int height, const LlavaVisionConfig& c);

// The encoded, placed chunks of pictures by key (vision/picture_lru.h). Not thread-safe.
class LlavaImageChunks {
 public:
  LlavaImageChunks(const LlavaVisionModel& tower, const std::array<uint64_t, 2>& decoder_fp,
                   ThreadPool* pool, size_t max_entries = 64);

  void set_store(ChunkStore* store) { lru_.set_store(store); }
  void set_stop(std::function<bool()> stop) { enc_.set_stop(std::move(stop)); }

  // One picture. encoded (optional): whether this call ran the tower.
  Result<std::shared_ptr<const ChunkContent>> image(const Image& img, bool* encoded = nullptr);

  Result<int64_t> rows(int width, int height) const {
    return llava_picture_rows(width, height, tower_.cfg);
  }
  using Stats = PictureLru::Stats;
  const Stats& stats() const { return lru_.stats(); }

 private:
  Result<std::vector<float>> encode(const Image& img);

  const LlavaVisionModel& tower_;
  std::array<uint64_t, 2> decoder_fp_;
  LlavaVisionEncoder enc_;
  PictureLru lru_;
};

}  // namespace kamera
