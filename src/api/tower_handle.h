// The tower side of a kamera_vision handle (include/kamera.h) for a Qwen2-VL / Qwen2.5-VL /
// Qwen3-VL mmproj or a Kimi-VL one: the tower loaded from llama.cpp's mmproj GGUF, its threads,
// and one image-chunk cache per decoder it has served (vision/image_chunks.h,
// vision/kimi_chunks.h: the key of an image names its placed embedding rows, so a second use
// never re-encodes). The other families (SmolVLM, Gemma 3, InternVL, LLaVA) and the audio towers
// (Qwen2.5-Omni's) need their decoder to load at all (its image tokens, its vocabulary's
// delimiters): PictureTowerHandle keeps the file and loads one tower per decoder it serves through
// the server's loader (audio/audio_tower.h load_media_tower: vision/media_tower.h's picture
// towers and the audio towers behind the same MediaTower interface), so a tower type that loader
// learns reaches kamera_chunk_from_image / kamera_chunk_from_audio unchanged.
#pragma once

#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "audio/audio_tower.h"
#include "core/thread_pool.h"
#include "vision/image_chunks.h"
#include "vision/kimi_chunks.h"
#include "vision/media_tower.h"
#include "vision/qwen_vision.h"

namespace kamera::api {

template <class Tower, class Chunks>
struct TowerHandle {
  Tower tower;
  std::unique_ptr<ThreadPool> threads;  // made on first use, as many as that context's engine
  std::vector<std::pair<std::array<uint64_t, 2>, std::unique_ptr<Chunks>>> caches;
  int64_t memory_hits = 0;  // embeddings found in a context's store memory (not re-encoded)
  int64_t store_hits = 0;   // read back from a slower tier of a context's store (disk)

  // The cache for a decoder (by fingerprint); n_threads sizes the tower's pool on first use.
  Chunks& for_decoder(const std::array<uint64_t, 2>& decoder_fp, int n_threads) {
    if (!threads) threads = std::make_unique<ThreadPool>(n_threads < 1 ? 1 : n_threads);
    for (auto& [fp, c] : caches)
      if (fp == decoder_fp) return *c;
    caches.emplace_back(decoder_fp, std::make_unique<Chunks>(tower, decoder_fp, threads.get()));
    return *caches.back().second;
  }
};

// A SmolVLM / Gemma 3 / InternVL / LLaVA mmproj, or one holding an audio tower: one MediaTower per
// decoder (by fingerprint), loaded on the decoder's first picture or clip (the pairing is checked
// then).
struct PictureTowerHandle {
  std::string path, type;
  int out_dim = 0;     // clip.vision.projection_dim (an audio tower's: clip.audio.projection_dim)
  bool audio = false;  // the file holds an audio tower (clip.has_audio_encoder)
  std::vector<std::pair<std::array<uint64_t, 2>, std::unique_ptr<MediaTower>>> towers;
  int64_t memory_hits = 0, store_hits = 0;  // as TowerHandle's

  Result<MediaTower*> for_decoder(const Model& decoder, int n_threads) {
    for (auto& [fp, t] : towers)
      if (fp == decoder.fingerprint) return t.get();
    KAMERA_ASSIGN_OR_RETURN(auto t, load_media_tower(path, decoder, n_threads, nullptr));
    towers.emplace_back(decoder.fingerprint, std::move(t));
    return towers.back().second.get();
  }
};

using QwenVisionHandle = TowerHandle<QwenVisionModel, ImageChunks>;
using KimiVisionHandle = TowerHandle<KimiVisionModel, KimiImageChunks>;

}  // namespace kamera::api
