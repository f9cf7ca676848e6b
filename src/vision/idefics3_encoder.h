// The forward of SmolVLM's tower (the math is in idefics3_vision.h): one tile of image_size x
// image_size pixels -> its tile_rows() rows of the decoder's width, raster order of the shuffled
// blocks.
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "vision/idefics3_vision.h"

namespace kamera {

class ThreadPool;

// The tile's patches, (side * side) x patch_values, each (channel, py, px), pixels normalized as
// (v / 255 - mean) / std in f32. Errors: a tile that is not image_size x image_size.
Result<std::vector<float>> idefics3_tile_patches(const Image& tile, const Idefics3VisionConfig& c);

class Idefics3VisionEncoder {
 public:
  // pool may be null (one thread for kamera's own kernels; OpenBLAS keeps its threads).
  Idefics3VisionEncoder(const Idefics3VisionModel& model, ThreadPool* pool)
      : m_(model), pool_(pool) {}

  // tile_rows() x out_dim rows.
  Result<std::vector<float>> encode(const Image& tile);
  // Asked before each layer: true stops the encode (an InvalidArgument saying so). Empty: never.
  void set_stop(std::function<bool()> stop) { stop_ = std::move(stop); }

 private:
  void block(const Idefics3VisionWeights::Layer& L, int n);

  const Idefics3VisionModel& m_;
  ThreadPool* pool_;
  std::function<bool()> stop_;
  std::vector<float> x_, nrm_, q_, k_, v_, att_, h1_, merged_, attn_scratch_;
  std::vector<int32_t> members_, offsets_;
};

}  // namespace kamera
