#include "vision/image_chunks.h"

#include <xxhash.h>

#include <chrono>

#include "vision/placement.h"

namespace kamera {

ChunkId image_key(std::span<const Image> frames, const QwenImageOptions& opt,
                  const std::array<uint64_t, 2>& tower_fp, const std::array<uint64_t, 2>& dec_fp) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  const char tag[] = "kamera-image-v1";
  XXH3_128bits_update(st, tag, sizeof(tag));
  XXH3_128bits_update(st, tower_fp.data(), sizeof(uint64_t) * 2);
  XXH3_128bits_update(st, dec_fp.data(), sizeof(uint64_t) * 2);
  const int32_t ints[] = {opt.patch, opt.merge, opt.temporal_patch};
  const int64_t bounds[] = {opt.min_pixels, opt.max_pixels};
  XXH3_128bits_update(st, ints, sizeof(ints));
  XXH3_128bits_update(st, bounds, sizeof(bounds));
  XXH3_128bits_update(st, opt.mean.data(), sizeof(float) * 3);
  XXH3_128bits_update(st, opt.std.data(), sizeof(float) * 3);
  const uint64_t n = frames.size();
  XXH3_128bits_update(st, &n, sizeof(n));
  for (const Image& f : frames) {
    const int32_t wh[] = {f.width, f.height};
    XXH3_128bits_update(st, wh, sizeof(wh));
    XXH3_128bits_update(st, f.rgb.data(), f.rgb.size());
  }
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return {h.high64, h.low64};
}

ImageChunks::ImageChunks(const QwenVisionModel& tower, const std::array<uint64_t, 2>& decoder_fp,
                         ThreadPool* pool, size_t max_entries)
    : tower_(tower),
      decoder_fp_(decoder_fp),
      opt_(QwenImageOptions::from(tower.cfg)),
      enc_(tower, pool),
      max_entries_(std::max<size_t>(1, max_entries)) {}

Result<std::shared_ptr<const ChunkContent>> ImageChunks::image(const Image& img, bool* encoded) {
  return frames(std::span<const Image>(&img, 1), encoded);
}

Result<std::shared_ptr<const ChunkContent>> ImageChunks::frames(std::span<const Image> frames,
                                                                bool* encoded) {
  if (encoded) *encoded = false;
  if (frames.empty()) return make_error(ErrorCode::InvalidArgument, "image chunk: no frames");
  const ChunkId key = image_key(frames, opt_, tower_.fingerprint, decoder_fp_);
  if (auto it = map_.find(key); it != map_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    ++stats_.hits;
    return it->second->second;
  }
  const auto t0 = std::chrono::steady_clock::now();
  KAMERA_ASSIGN_OR_RETURN(const QwenPatches patches, qwen_preprocess_frames(frames, opt_));
  KAMERA_ASSIGN_OR_RETURN(QwenVisionEmbeddings e, enc_.encode(patches));
  stats_.encode_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.encodes;
  if (encoded) *encoded = true;
  auto chunk = std::make_shared<const ChunkContent>(place_image(std::move(e)));
  lru_.emplace_front(key, chunk);
  map_[key] = lru_.begin();
  while (lru_.size() > max_entries_) {
    map_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return chunk;
}

}  // namespace kamera
