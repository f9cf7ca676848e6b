#include "vision/picture_lru.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "store/store.h"
#include "vision/stored_image.h"

namespace kamera {

ChunkId picture_key(const char* tag, const Image& img, const std::array<uint64_t, 2>& tower_fp,
                    const std::array<uint64_t, 2>& dec_fp) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  XXH3_128bits_update(st, tag, std::strlen(tag) + 1);
  XXH3_128bits_update(st, tower_fp.data(), sizeof(uint64_t) * 2);
  XXH3_128bits_update(st, dec_fp.data(), sizeof(uint64_t) * 2);
  const int32_t ints[] = {img.width, img.height};
  XXH3_128bits_update(st, ints, sizeof(ints));
  XXH3_128bits_update(st, img.rgb.data(), img.rgb.size());
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return {h.high64, h.low64};
}

PictureLru::PictureLru(const std::array<uint64_t, 2>& decoder_fp, size_t max_entries)
    : decoder_fp_(decoder_fp), max_entries_(std::max<size_t>(1, max_entries)) {}

Result<std::shared_ptr<const ChunkContent>> PictureLru::get(
    const ChunkId& key, int dim, const std::function<Result<ChunkContent>()>& encode,
    bool* encoded) {
  if (encoded) *encoded = false;
  if (auto it = map_.find(key); it != map_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    ++stats_.hits;
    return it->second->second;
  }
  std::shared_ptr<const ChunkContent> chunk = find_stored_image(store_, key, dim);
  if (chunk) {
    ++stats_.store_hits;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    KAMERA_ASSIGN_OR_RETURN(ChunkContent c, encode());
    stats_.encode_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++stats_.encodes;
    if (encoded) *encoded = true;
    chunk = put_stored_image(store_, key, std::move(c));
  }
  lru_.emplace_front(key, chunk);
  map_[key] = lru_.begin();
  while (lru_.size() > max_entries_) {
    map_.erase(lru_.back().first);
    lru_.pop_back();
  }
  if (store_) store_->link_image(chunk_id(decoder_fp_, *chunk), key);
  return chunk;
}

}  // namespace kamera
