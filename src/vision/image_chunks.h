// Images and video frames as position-free chunks of the reuse layer (reuse/chunk_cache.h).
//
// An image's key is XXH3-128 of its decoded pixels (each frame's width, height and RGB bytes), the
// preprocessing parameters (patch, merge, temporal patch, pixel bounds, mean, std) and both
// models' fingerprints (the tower's and the decoder's): the same picture under the same pair is
// the same key wherever it appears. The key names the placed chunk (embedding rows with the
// (t, h, w) layout of placement.h), kept here so that a second use never re-encodes; the chunk's
// canonical KV and patches are then the ChunkCache's, keyed by the chunk's content id, and are
// relocated like any chunk's: placing it at p shifts t, h and w by p alike.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>

#include "media/image.h"
#include "reuse/chunk.h"
#include "vision/qwen_preprocess.h"
#include "vision/qwen_vision_encoder.h"

namespace kamera {

class ThreadPool;

ChunkId image_key(std::span<const Image> frames, const QwenImageOptions& opt,
                  const std::array<uint64_t, 2>& tower_fingerprint,
                  const std::array<uint64_t, 2>& decoder_fingerprint);

// The encoded, placed chunks of images, by image key, least recently used dropped beyond
// max_entries. Not thread-safe.
class ImageChunks {
 public:
  ImageChunks(const QwenVisionModel& tower, const std::array<uint64_t, 2>& decoder_fingerprint,
              ThreadPool* pool, size_t max_entries = 64);

  const QwenImageOptions& options() const { return opt_; }

  // One image (its frame fills the temporal patch) or video frames (paired in time, t advancing
  // per pair). encoded (optional) tells whether this call ran the tower.
  Result<std::shared_ptr<const ChunkContent>> image(const Image& img, bool* encoded = nullptr);
  Result<std::shared_ptr<const ChunkContent>> frames(std::span<const Image> frames,
                                                     bool* encoded = nullptr);

  struct Stats {
    int64_t hits = 0, encodes = 0;
    double encode_ms = 0;  // wall time in the tower (preprocessing included)
  };
  const Stats& stats() const { return stats_; }
  size_t size() const { return map_.size(); }

 private:
  using Entry = std::pair<ChunkId, std::shared_ptr<const ChunkContent>>;
  const QwenVisionModel& tower_;
  std::array<uint64_t, 2> decoder_fp_;
  QwenImageOptions opt_;
  QwenVisionEncoder enc_;
  size_t max_entries_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<ChunkId, std::list<Entry>::iterator, ChunkIdHash> map_;
  Stats stats_;
};

}  // namespace kamera
