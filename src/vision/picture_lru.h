// The placed chunks of pictures by key, as the one-picture towers' caches keep them
// (vision/kimi_chunks.h, vision/idefics3_chunks.h): least recently used dropped beyond max_entries;
// with a store (set_store) a miss is looked up in, and an encode written through to, the store's
// image entries, and the chunk made of the rows is linked to the key (deleting the chunk deletes
// the stored rows). Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <unordered_map>

#include "media/image.h"
#include "reuse/chunk.h"
#include "vision/image_chunks.h"

namespace kamera {

class ChunkStore;

// A picture's key for the towers that read the pixels alone (SmolVLM, Gemma 3): XXH3-128 of tag
// (its bytes and the terminating NUL), the tower's and the decoder's fingerprints, the picture's
// width, height and RGB bytes.
ChunkId picture_key(const char* tag, const Image& img, const std::array<uint64_t, 2>& tower_fp,
                    const std::array<uint64_t, 2>& decoder_fp);

class PictureLru {
 public:
  PictureLru(const std::array<uint64_t, 2>& decoder_fingerprint, size_t max_entries);

  void set_store(ChunkStore* store) { store_ = store; }

  // The kept chunk of key, else the store's (rows of width dim), else encode()'s, stored.
  // encoded (optional): whether encode ran.
  Result<std::shared_ptr<const ChunkContent>> get(
      const ChunkId& key, int dim, const std::function<Result<ChunkContent>()>& encode,
      bool* encoded);

  using Stats = ImageChunks::Stats;
  const Stats& stats() const { return stats_; }

 private:
  using Entry = std::pair<ChunkId, std::shared_ptr<const ChunkContent>>;
  ChunkStore* store_ = nullptr;
  std::array<uint64_t, 2> decoder_fp_;
  size_t max_entries_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<ChunkId, std::list<Entry>::iterator, ChunkIdHash> map_;
  Stats stats_;
};

}  // namespace kamera
