// Image and video chunks through a Qwen2-VL / Qwen2.5-VL / Qwen3-VL tower, Kimi-VL's MoonViT, or
// SmolVLM's, Gemma 3's, InternVL's or LLaVA's tower (vision/media_tower.h) (include/kamera.h): PNG
// or JPEG (a file or bytes in memory) -> decoded, preprocessed as Hugging Face's processor does,
// encoded once per image key (vision/image_chunks.h, vision/kimi_chunks.h)
// -> a chunk of embedding rows (Qwen: the (t, h, w) layout of vision/rope_index.h; Kimi-VL:
// linear positions), made for the context's decoder and usable wherever a text chunk is
// (sequences, windows, relocation, the store).
#include <string>
#include <vector>

#include "api/handles.h"
#include "media/image.h"

using namespace kamera;
using namespace kamera::api;

namespace {

// The checks every image entry point shares: a tower that takes pictures (Qwen or Kimi-VL) beside
// the decoder it pairs with.
kamera_status check_pair(const char* fn, kamera_context* ctx, kamera_vision* vision) {
  KAMERA_API_REQUIRE(fn, ctx);
  KAMERA_API_REQUIRE(fn, vision);
  if (!vision->qwen && !vision->kimi && !vision->picture)
    return fail(KAMERA_ERR_INVALID_ARGUMENT,
                "{}: the vision handle is the mini-VL's fixed-size encoder, not a tower that takes "
                "pictures of any size (use kamera_vision_encode)",
                fn);
  const Model& m = ctx->box->ctx->model();
  if (vision->picture) {  // the tower loads beside the decoder, which checks the pair
    auto t = vision->picture->for_decoder(m, ctx->box->ctx->engine().threads().size());
    if (!t.ok()) return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: {}", fn, t.message());
    return KAMERA_OK;
  }
  Status st = vision->qwen
                  ? check_qwen_pair(vision->qwen->tower.cfg, m.cfg, vision->qwen->tower.source)
                  : check_kimi_pair(vision->kimi->tower.cfg, m.cfg, vision->kimi->tower.source);
  if (!st.ok()) return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: {}", fn, st.message());
  return KAMERA_OK;
}

// The placed chunk of frames from a picture cache (ImageChunks, KimiImageChunks) or a tower.
template <class Cache>
Result<std::shared_ptr<const ChunkContent>> placed_frames(Cache& cache,
                                                          const std::vector<Image>& frames,
                                                          double fps) {
  return cache.frames(frames, nullptr, fps);
}
Result<std::shared_ptr<const ChunkContent>> placed_frames(MediaTower& tower,
                                                          const std::vector<Image>& frames,
                                                          double fps) {
  return tower.chunk(frames, nullptr, fps, {});
}

// Decoded frames (one: an image; several: video frames paired in time) -> a new chunk handle.
// The handle's cache, then the context's store (its memory, then its tiers: another process may
// have encoded it), then the tower; fps as ImageChunks::frames (0: the default rate). q counts
// the store's hits.
template <class Handle, class Cache>
kamera_status cached_chunk(const char* fn, Context& c, Handle& q, Cache& cache,
                           const std::vector<Image>& frames, kamera_chunk** out, double fps) {
  cache.set_store(&c.store());  // a handle may serve several contexts of one decoder
  const int64_t tier_hits = c.store().stats().image_tier_hits;
  const int64_t store_hits = cache.stats().store_hits;
  auto placed = placed_frames(cache, frames, fps);
  cache.set_store(nullptr);
  if (!placed.ok()) return set_error(with_context(placed.error(), fn));
  if (cache.stats().store_hits > store_hits)
    ++(c.store().stats().image_tier_hits > tier_hits ? q.store_hits : q.memory_hits);
  return make_chunk(fn, c.model(), **placed, out);
}

template <class Handle>
kamera_status tower_chunk(const char* fn, Context& c, Handle& q, const std::vector<Image>& frames,
                          kamera_chunk** out, double fps) {
  auto& cache = q.for_decoder(c.model().fingerprint, c.engine().threads().size());
  return cached_chunk(fn, c, q, cache, frames, out, fps);
}

kamera_status frames_chunk(const char* fn, kamera_context* ctx, kamera_vision* vision,
                           const std::vector<Image>& frames, kamera_chunk** out, double fps = 0) {
  Context& c = *ctx->box->ctx;
  if (vision->picture) {
    auto t = vision->picture->for_decoder(c.model(), c.engine().threads().size());
    if (!t.ok()) return set_error(with_context(t.error(), fn));
    return cached_chunk(fn, c, *vision->picture, **t, frames, out, fps);
  }
  return vision->qwen ? tower_chunk(fn, c, *vision->qwen, frames, out, fps)
                      : tower_chunk(fn, c, *vision->kimi, frames, out, fps);
}

// The counters of a tower handle's caches.
template <class Handle>
void add_stats(const Handle& h, kamera_vision_stats* out) {
  auto add = [out](const ImageChunks::Stats& s) {
    out->encodes += s.encodes;
    out->hits += s.hits;
    out->encode_ms += s.encode_ms;
  };
  if constexpr (requires { h.caches; })
    for (const auto& [fp, c] : h.caches) add(c->stats());
  else
    for (const auto& [fp, t] : h.towers) add(t->stats());
  out->hits += h.memory_hits;
  out->store_hits = h.store_hits;
}

}  // namespace

extern "C" {

kamera_status kamera_chunk_from_image(kamera_context* ctx, kamera_vision* vision, const char* path,
                                      kamera_chunk** out) {
  clear_out(out);
  constexpr const char* fn = "kamera_chunk_from_image";
  return guarded(fn, [&] {
    if (auto st = check_pair(fn, ctx, vision); st != KAMERA_OK) return st;
    KAMERA_API_REQUIRE(fn, path);
    KAMERA_API_REQUIRE(fn, out);
    auto img = load_image(path);
    if (!img.ok()) return set_error(with_context(img.error(), fn));
    return frames_chunk(fn, ctx, vision, {std::move(img.value())}, out);
  });
}

kamera_status kamera_chunk_from_image_bytes(kamera_context* ctx, kamera_vision* vision,
                                            const uint8_t* bytes, size_t n_bytes,
                                            kamera_chunk** out) {
  clear_out(out);
  constexpr const char* fn = "kamera_chunk_from_image_bytes";
  return guarded(fn, [&] {
    if (auto st = check_pair(fn, ctx, vision); st != KAMERA_OK) return st;
    KAMERA_API_REQUIRE(fn, bytes);
    KAMERA_API_REQUIRE(fn, out);
    auto img = decode_image(std::span<const uint8_t>(bytes, n_bytes), "image bytes");
    if (!img.ok()) return set_error(with_context(img.error(), fn));
    return frames_chunk(fn, ctx, vision, {std::move(img.value())}, out);
  });
}

kamera_status kamera_chunk_from_frames_at(kamera_context* ctx, kamera_vision* vision,
                                          const char* const* paths, int32_t n_paths, double fps,
                                          kamera_chunk** out) {
  clear_out(out);
  constexpr const char* fn = "kamera_chunk_from_frames_at";
  return guarded(fn, [&] {
    if (auto st = check_pair(fn, ctx, vision); st != KAMERA_OK) return st;
    KAMERA_API_REQUIRE(fn, paths);
    KAMERA_API_REQUIRE(fn, out);
    if (n_paths < 1 || n_paths > 4096)
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: {} frames (need 1 .. 4096)", fn, n_paths);
    if (!(fps >= 0) || !(fps <= 1000))
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: fps {} (need 0 for the default, or (0, 1000])",
                  fn, fps);
    std::vector<Image> frames;
    for (int32_t i = 0; i < n_paths; ++i) {
      if (!paths[i]) return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: frame path {} is null", fn, i);
      auto img = load_image(paths[i]);
      if (!img.ok()) return set_error(with_context(img.error(), fn));
      frames.push_back(std::move(img.value()));
    }
    return frames_chunk(fn, ctx, vision, frames, out, fps);
  });
}

kamera_status kamera_chunk_from_frames(kamera_context* ctx, kamera_vision* vision,
                                       const char* const* paths, int32_t n_paths,
                                       kamera_chunk** out) {
  return kamera_chunk_from_frames_at(ctx, vision, paths, n_paths, 0, out);
}

kamera_status kamera_vision_get_stats(const kamera_vision* vision, kamera_vision_stats* out) {
  return guarded("kamera_vision_get_stats", [&] {
    KAMERA_API_REQUIRE("kamera_vision_get_stats", vision);
    KAMERA_API_REQUIRE("kamera_vision_get_stats", out);
    *out = kamera_vision_stats{};
    if (vision->qwen) add_stats(*vision->qwen, out);
    if (vision->kimi) add_stats(*vision->kimi, out);
    if (vision->picture) add_stats(*vision->picture, out);
    return KAMERA_OK;
  });
}

}  // extern "C"
