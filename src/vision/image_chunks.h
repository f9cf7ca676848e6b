// Images and video frames as position-free chunks of the reuse layer (cache/chunk_cache.h).
//
// An image's key is XXH3-128 of its decoded pixels (each frame's width, height and RGB bytes), the
// preprocessing parameters (patch, merge, temporal patch, pixel bounds, mean, std) and both
// models' fingerprints (the tower's and the decoder's): the same picture under the same pair is
// the same key wherever it appears. The key names the placed chunk (embedding rows with the
// (t, h, w) layout of rope_index.h), kept here so that a second use never re-encodes; the chunk's
// canonical KV and patches are then the ChunkCache's, keyed by the chunk's content id, and are
// relocated like any chunk's: placing it at p shifts t, h and w by p alike.
//
// With a store (set_store), a miss of the in-memory LRU asks the store for the key (its memory,
// then its tiers: disk, Redis), and a fresh encode is written through to it, so a restarted
// process or another server on the same tiers does not run the tower for a picture it has seen.
// The store keeps the rows placed with Qwen2-VL's rule (t = slice index); a Qwen2.5-VL tower's
// video is retimed from them (vision/video_time.h) for the frame rate asked, so one encode serves
// every fps.
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
class ChunkStore;

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
  // Embeddings are also looked up in, and written to, this store (nullptr: none). The store must
  // outlive its use here; it is thread-safe, this class is not.
  void set_store(ChunkStore* store) { store_ = store; }
  // Whether a video's t is scaled by seconds (a Qwen2.5-VL tower) or is the slice index
  // (Qwen2-VL).
  bool time_scaled() const;
  void set_tokens_per_second(double tps) { tokens_per_second_ = tps; }
  // Asked between the tower's layers: true stops an encode (QwenVisionEncoder::set_stop).
  void set_stop(std::function<bool()> stop) { enc_.set_stop(std::move(stop)); }

  // One image (its frame fills the temporal patch) or video frames (paired in time). encoded
  // (optional) tells whether this call ran the tower. fps: the frames' rate, for a Qwen2.5-VL
  // tower's t = trunc(k * temporal_patch / fps * tokens_per_second) of slice k (0: the
  // processor's default, kDefaultVideoFps); a Qwen2-VL tower ignores it (t = k). Errors: no
  // frames, an fps that is negative or not finite, a picture the tower cannot take, more than
  // one pair of frames for a Qwen3-VL tower (its video is pairs and timestamps:
  // vision/qwen3vl_video.h).
  Result<std::shared_ptr<const ChunkContent>> image(const Image& img, bool* encoded = nullptr);
  Result<std::shared_ptr<const ChunkContent>> frames(std::span<const Image> frames,
                                                     bool* encoded = nullptr, double fps = 0);

  struct Stats {
    int64_t hits = 0, encodes = 0;
    int64_t store_hits = 0;  // LRU misses found in the store (its memory or a tier)
    double encode_ms = 0;    // wall time in the tower (preprocessing included)
  };
  const Stats& stats() const { return stats_; }
  size_t size() const { return map_.size(); }

 private:
  using Entry = std::pair<ChunkId, std::shared_ptr<const ChunkContent>>;
  // The rows placed with t = slice index: the store's, or encoded now (and stored).
  Result<std::shared_ptr<const ChunkContent>> slice_placed(std::span<const Image> frames,
                                                           const ChunkId& key, bool* encoded);
  const QwenVisionModel& tower_;
  ChunkStore* store_ = nullptr;
  double tokens_per_second_;
  std::array<uint64_t, 2> decoder_fp_;
  QwenImageOptions opt_;
  QwenVisionEncoder enc_;
  size_t max_entries_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<ChunkId, std::list<Entry>::iterator, ChunkIdHash> map_;
  Stats stats_;
};

}  // namespace kamera
