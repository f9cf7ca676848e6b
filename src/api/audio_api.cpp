// Audio clips through an audio tower (include/kamera.h kamera_chunk_from_audio): WAV, FLAC or MP3
// (a file or bytes in memory, the container told apart by its first bytes: media/audio_file.h) ->
// decoded, mixed to mono and resampled to 16 kHz as the server decodes an input_audio part ->
// the tower's placed chunk (MediaTower::audio_chunk: Qwen2.5-Omni's rows on positions (i, i, i),
// audio/audio_chunks.h), encoded once per clip and decoder and kept in the context's store, made
// for the context's decoder and usable wherever a text chunk is. The tower is the vision handle's
// (kamera_vision_load of a file with an audio encoder: api/tower_handle.h PictureTowerHandle, which
// loads it through audio/audio_tower.h's load_media_tower beside the decoder), so a tower type that
// loader learns needs nothing here.
#include <string>

#include "api/handles.h"
#include "audio/audio_chunks.h"
#include "media/audio_file.h"

using namespace kamera;
using namespace kamera::api;

namespace {

// The audio tower of the vision handle, loaded beside the context's decoder.
Result<MediaTower*> audio_tower(const char* fn, Context& c, kamera_vision& vision) {
  if (!vision.picture)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: the vision handle is a {} tower, which reads pictures, not audio (load "
                      "an audio tower's mmproj: Qwen2.5-Omni's or Qwen3-ASR's)",
                      fn,
                      vision.qwen   ? "Qwen2-VL"
                      : vision.kimi ? "Kimi-VL"
                                    : "mini-VL");
  if (!vision.picture->audio)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: {} is a picture tower ({}), which reads no audio (load an audio "
                      "tower's mmproj: Qwen2.5-Omni's or Qwen3-ASR's)",
                      fn, vision.picture->path, vision.picture->type);
  auto t = vision.picture->for_decoder(c.model(), c.engine().threads().size());
  if (!t.ok()) return with_context(t.error(), fn);
  if (!(*t)->takes_audio())
    return make_error(ErrorCode::Internal, "{}: the tower of {} reads no audio", fn,
                      vision.picture->path);
  return t;
}

// The clip's placed chunk: the tower's cache, then the context's store (its memory, then its
// tiers), then the tower; the handle counts the store's hits as kamera_chunk_from_image does.
kamera_status clip_chunk(const char* fn, kamera_context* ctx, kamera_vision* vision,
                         const Result<AudioClip>& clip, kamera_chunk** out) {
  Context& c = *ctx->box->ctx;
  auto t = audio_tower(fn, c, *vision);
  if (!t.ok()) return set_error(t.error());
  if (!clip.ok()) return set_error(with_context(clip.error(), fn));
  MediaTower& tower = **t;
  PictureTowerHandle& h = *vision->picture;
  tower.set_store(&c.store());  // a handle may serve several contexts of one decoder
  const int64_t tier_hits = c.store().stats().image_tier_hits;
  const int64_t store_hits = tower.stats().store_hits;
  auto placed = tower.audio_chunk(clip->samples, nullptr, {});
  tower.set_store(nullptr);
  if (!placed.ok()) return set_error(with_context(placed.error(), fn));
  if (tower.stats().store_hits > store_hits)
    ++(c.store().stats().image_tier_hits > tier_hits ? h.store_hits : h.memory_hits);
  return make_chunk(fn, c.model(), **placed, out);
}

}  // namespace

extern "C" {

kamera_status kamera_chunk_from_audio(kamera_context* ctx, kamera_vision* vision, const char* path,
                                      kamera_chunk** out) {
  clear_out(out);
  constexpr const char* fn = "kamera_chunk_from_audio";
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, ctx);
    KAMERA_API_REQUIRE(fn, vision);
    KAMERA_API_REQUIRE(fn, path);
    KAMERA_API_REQUIRE(fn, out);
    return clip_chunk(fn, ctx, vision, load_audio(path, kAudioSampleRate), out);
  });
}

kamera_status kamera_chunk_from_audio_bytes(kamera_context* ctx, kamera_vision* vision,
                                            const uint8_t* bytes, size_t n_bytes,
                                            kamera_chunk** out) {
  clear_out(out);
  constexpr const char* fn = "kamera_chunk_from_audio_bytes";
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, ctx);
    KAMERA_API_REQUIRE(fn, vision);
    KAMERA_API_REQUIRE(fn, bytes);
    KAMERA_API_REQUIRE(fn, out);
    return clip_chunk(
        fn, ctx, vision,
        read_audio(std::span<const uint8_t>(bytes, n_bytes), "audio bytes", kAudioSampleRate), out);
  });
}

}  // extern "C"
