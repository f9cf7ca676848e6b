// The tower side of a kamera_vision handle (include/kamera.h) for a Qwen2-VL / Qwen2.5-VL /
// Qwen3-VL mmproj or a Kimi-VL one: the tower loaded from llama.cpp's mmproj GGUF, its threads,
// and one image-chunk cache per decoder it has served (vision/image_chunks.h,
// vision/kimi_chunks.h: the key of an image names its placed embedding rows, so a second use
// never re-encodes).
#pragma once

#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "vision/image_chunks.h"
#include "vision/kimi_chunks.h"
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

using QwenVisionHandle = TowerHandle<QwenVisionModel, ImageChunks>;
using KimiVisionHandle = TowerHandle<KimiVisionModel, KimiImageChunks>;

}  // namespace kamera::api
