// Kimi-VL pictures as position-free chunks (the Qwen side is vision/image_chunks.h): one picture
// per chunk, its merged tokens on linear positions 0..n-1 (the deepseek2 decoder's rope is 1-D),
// so a picture relocates, is patched and windowed like any text chunk.
//
// A picture's key is XXH3-128 of its pixels (width, height, RGB bytes), the processor's token
// limit and both models' fingerprints; the key names the placed chunk, kept here in an LRU and,
// with a store (set_store), looked up in and written through to the store's image entries (its
// memory, then its tiers), as ImageChunks does for a Qwen tower.
//
// The prompt around a picture: Kimi-VL's chat template writes
//   <|media_start|>image<|media_content|> (the picture's rows) <|media_end|>
// kimi_delimiters() gives those three pieces' token ids when the decoder's vocabulary has them,
// and none otherwise (make-model's random vocabularies: the picture's rows stand alone).
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>

#include "media/image.h"
#include "model/model.h"
#include "reuse/chunk.h"
#include "vision/image_chunks.h"
#include "vision/kimi_vision_encoder.h"
#include "vision/picture_lru.h"
#include "vision/vl_prompt.h"

namespace kamera {

class ThreadPool;
class ChunkStore;

inline constexpr std::string_view kMediaStart = "<|media_start|>";
inline constexpr std::string_view kMediaContent = "<|media_content|>";
inline constexpr std::string_view kMediaEnd = "<|media_end|>";
// What Kimi-VL's chat template writes before a picture's rows.
inline constexpr std::string_view kKimiImageOpen = "<|media_start|>image<|media_content|>";

// Kimi-VL's delimiters in `tok`'s vocabulary: open = <|media_start|> "image" <|media_content|>,
// close = <|media_end|>; both empty when any of the three pieces is missing.
VisionDelimiters kimi_delimiters(const Tokenizer* tok);

// Whether the tower's rows go into `decoder`: a deepseek2 decoder of the tower's projected width.
Status check_kimi_pair(const KimiVisionConfig& tower, const ModelConfig& decoder,
                       const std::string& mmproj);

// The placed chunk of one picture's rows: layout linear 0..n-1.
ChunkContent kimi_image_chunk(KimiVisionEmbeddings e);

ChunkId kimi_image_key(const Image& img, const KimiVisionConfig& cfg,
                       const std::array<uint64_t, 2>& tower_fingerprint,
                       const std::array<uint64_t, 2>& decoder_fingerprint);

// The encoded, placed chunks of pictures, by key, least recently used dropped beyond
// max_entries. Not thread-safe.
class KimiImageChunks {
 public:
  KimiImageChunks(const KimiVisionModel& tower, const std::array<uint64_t, 2>& decoder_fingerprint,
                  ThreadPool* pool, size_t max_entries = 64);

  // Embeddings are also looked up in, and written to, this store (nullptr: none).
  void set_store(ChunkStore* store) { lru_.set_store(store); }
  // Asked between the tower's layers: true stops an encode (KimiVisionEncoder::set_stop).
  void set_stop(std::function<bool()> stop) { enc_.set_stop(std::move(stop)); }

  // One picture. encoded (optional): whether this call ran the tower. Errors: a picture the tower
  // cannot take (InvalidArgument, with the reason).
  Result<std::shared_ptr<const ChunkContent>> image(const Image& img, bool* encoded = nullptr);
  // The interface of ImageChunks::frames: one picture, or Unsupported for several (Kimi-VL's
  // video path is not here).
  Result<std::shared_ptr<const ChunkContent>> frames(std::span<const Image> frames,
                                                     bool* encoded = nullptr, double fps = 0);

  using Stats = PictureLru::Stats;
  const Stats& stats() const { return lru_.stats(); }

 private:
  const KimiVisionModel& tower_;
  std::array<uint64_t, 2> decoder_fp_;
  KimiVisionEncoder enc_;
  PictureLru lru_;
};

}  // namespace kamera
