// SmolVLM pictures as position-free chunks: one picture per chunk, its whole prompt (the
// <fake_token_around_image> / <row_r_col_c> / "\n" / <global-img> tokens and every tile's rows,
// vision/idefics3_preprocess.h) as embedding rows on linear positions 0..n-1 (the llama
// decoder's rope is 1-D), so a picture relocates, is patched and windowed like a text chunk. A
// token enters as its row of the decoder's token embedding table, which is what the decoder
// reads for the token itself (llama does not scale it).
//
// A picture's key is XXH3-128 of its pixels (width, height, RGB bytes) and both models'
// fingerprints; the key names the placed chunk, kept here in an LRU and, with a store
// (set_store), looked up in and written through to the store's image entries, as
// KimiImageChunks does.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "media/image.h"
#include "model/model.h"
#include "reuse/chunk.h"
#include "vision/idefics3_encoder.h"
#include "vision/idefics3_preprocess.h"
#include "vision/picture_lru.h"

namespace kamera {

class ThreadPool;
class ChunkStore;

// Whether the tower's rows go into `decoder`: a llama decoder of the tower's projected width
// whose vocabulary has SmolVLM's image tokens.
Status check_idefics3_pair(const Idefics3VisionConfig& tower, const Model& decoder,
                           const std::string& mmproj);

// The decoder's token embedding rows of the tokens a picture's prompt may hold.
struct Idefics3TokenRows {
  Idefics3Vocab vocab;
  int dim = 0;
  std::unordered_map<int32_t, std::vector<float>> rows;

  static Result<Idefics3TokenRows> from(const Model& decoder);
};

// The placed chunk of one picture: layout's pieces in order, tile i's rows from tiles[i].
Result<ChunkContent> idefics3_picture_chunk(const std::vector<Idefics3Piece>& layout,
                                            const std::vector<std::vector<float>>& tiles,
                                            const Idefics3TokenRows& tokens);

// The encoded, placed chunks of pictures by key (vision/picture_lru.h). Not thread-safe.
class Idefics3ImageChunks {
 public:
  Idefics3ImageChunks(const Idefics3VisionModel& tower, Idefics3TokenRows tokens,
                      const std::array<uint64_t, 2>& decoder_fingerprint, ThreadPool* pool,
                      size_t max_entries = 64);

  void set_store(ChunkStore* store) { lru_.set_store(store); }
  void set_stop(std::function<bool()> stop) { enc_.set_stop(std::move(stop)); }

  // Rows the picture takes in the prompt, from its size alone.
  Result<int64_t> rows(int width, int height) const;
  // One picture. encoded (optional): whether this call ran the tower.
  Result<std::shared_ptr<const ChunkContent>> image(const Image& img, bool* encoded = nullptr);

  using Stats = PictureLru::Stats;
  const Stats& stats() const { return lru_.stats(); }

 private:
  Result<ChunkContent> encode(const Image& img);
  const Idefics3VisionModel& tower_;
  Idefics3TokenRows tokens_;
  std::array<uint64_t, 2> decoder_fp_;
  Idefics3VisionEncoder enc_;
  PictureLru lru_;
};

}  // namespace kamera
