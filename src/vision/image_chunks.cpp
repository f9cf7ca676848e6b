#include "vision/image_chunks.h"

#include <xxhash.h>

#include <chrono>

#include <cmath>

#include "store/store.h"
#include "vision/rope_index.h"
#include "vision/stored_image.h"
#include "vision/video_time.h"

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
      tokens_per_second_(kDefaultTokensPerSecond),
      decoder_fp_(decoder_fp),
      opt_(QwenImageOptions::from(tower.cfg)),
      enc_(tower, pool),
      max_entries_(std::max<size_t>(1, max_entries)) {}

Result<std::shared_ptr<const ChunkContent>> ImageChunks::image(const Image& img, bool* encoded) {
  return frames(std::span<const Image>(&img, 1), encoded);
}

bool ImageChunks::time_scaled() const {
  return tower_.cfg.variant == QwenVisionVariant::Qwen25VL;
}

namespace {

// The LRU's key of a retimed video: the image key with the time scale mixed in.
ChunkId timed_key(const ChunkId& key, const VideoTime& vt) {
  struct {
    uint64_t hi, lo;
    double spg, tps;
  } v{key.hi, key.lo, vt.second_per_grid_t, vt.tokens_per_second};
  const XXH128_hash_t h = XXH3_128bits(&v, sizeof(v));
  return {h.high64, h.low64};
}

}  // namespace

Result<std::shared_ptr<const ChunkContent>> ImageChunks::slice_placed(std::span<const Image> frames,
                                                                      const ChunkId& key,
                                                                      bool* encoded) {
  if (auto stored = find_stored_image(store_, key, tower_.cfg.embed_width())) {
    ++stats_.store_hits;
    return stored;
  }
  const auto t0 = std::chrono::steady_clock::now();
  KAMERA_ASSIGN_OR_RETURN(const QwenPatches patches, qwen_preprocess_frames(frames, opt_));
  KAMERA_ASSIGN_OR_RETURN(QwenVisionEmbeddings e, enc_.encode(patches));
  stats_.encode_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.encodes;
  if (encoded) *encoded = true;
  return put_stored_image(store_, key, image_chunk(std::move(e)));
}

Result<std::shared_ptr<const ChunkContent>> ImageChunks::frames(std::span<const Image> frames,
                                                                bool* encoded, double fps) {
  if (encoded) *encoded = false;
  if (frames.empty()) return make_error(ErrorCode::InvalidArgument, "image chunk: no frames");
  if (!(fps >= 0) || !std::isfinite(fps))
    return make_error(ErrorCode::InvalidArgument, "video: fps {} must be positive", fps);
  if (tower_.cfg.qwen3() && frames.size() > size_t(opt_.temporal_patch))
    return make_error(ErrorCode::Unsupported,
                      "video: Qwen3-VL places each pair of frames as an image of its own, with "
                      "its timestamp as text between (vision/qwen3vl_video.h); {} frames in one "
                      "chunk would be placed as Qwen2-VL places them",
                      frames.size());
  const ChunkId key = image_key(frames, opt_, tower_.fingerprint, decoder_fp_);
  // a Qwen2.5-VL video of more than one temporal slice: t scaled by seconds
  const bool timed = time_scaled() && frames.size() > size_t(opt_.temporal_patch);
  const VideoTime vt = VideoTime::from_fps(fps > 0 ? fps : kDefaultVideoFps, opt_.temporal_patch,
                                           tokens_per_second_);
  const ChunkId slot = timed ? timed_key(key, vt) : key;
  auto lru_get = [&](const ChunkId& k) -> std::shared_ptr<const ChunkContent> {
    auto it = map_.find(k);
    if (it == map_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    ++stats_.hits;
    return it->second->second;
  };
  auto lru_put = [&](const ChunkId& k, std::shared_ptr<const ChunkContent> c) {
    lru_.emplace_front(k, std::move(c));
    map_[k] = lru_.begin();
    while (lru_.size() > max_entries_) {
      map_.erase(lru_.back().first);
      lru_.pop_back();
    }
  };
  if (auto hit = lru_get(slot)) return hit;
  // the rows placed with t = slice index: this LRU (another rate), the store, or the tower
  std::shared_ptr<const ChunkContent> base = timed ? lru_get(key) : nullptr;
  if (!base) {
    KAMERA_ASSIGN_OR_RETURN(base, slice_placed(frames, key, encoded));
    lru_put(key, base);
  }
  std::shared_ptr<const ChunkContent> chunk = base;
  if (timed) {
    KAMERA_ASSIGN_OR_RETURN(ChunkContent retimed, retime_video(*base, vt));
    chunk = std::make_shared<const ChunkContent>(std::move(retimed));
    lru_put(slot, chunk);
  }
  // deleting the chunk made of these rows deletes the stored embeddings too
  if (store_) store_->link_image(chunk_id(decoder_fp_, *chunk), key);
  return chunk;
}

}  // namespace kamera
