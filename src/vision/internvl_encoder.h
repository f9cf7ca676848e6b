// The forward of InternVL's tower (the math is in internvl_vision.h): one tile of image_size x
// image_size pixels -> its rows() rows of the decoder's width, raster order of the shuffled
// blocks.
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "vision/internvl_vision.h"

namespace kamera {

class ThreadPool;

class InternvlVisionEncoder {
 public:
  // pool may be null (one thread for kamera's own kernels; OpenBLAS keeps its threads).
  InternvlVisionEncoder(const InternvlVisionModel& model, ThreadPool* pool)
      : m_(model), pool_(pool) {}

  // rows() x out_dim rows of one tile of image_size x image_size (internvl_tiles).
  Result<std::vector<float>> encode(const Image& tile);
  // Asked before each layer: true stops the encode (an InvalidArgument saying so). Empty: never.
  void set_stop(std::function<bool()> stop) { stop_ = std::move(stop); }

 private:
  void embed(const std::vector<float>& patches);
  void block(const InternvlVisionWeights::Layer& L);
  std::vector<float> shuffle() const;

  const InternvlVisionModel& m_;
  ThreadPool* pool_;
  std::function<bool()> stop_;
  std::vector<float> x_, nrm_, q_, k_, v_, att_, h1_, attn_scratch_;
  std::vector<int32_t> members_, offsets_;
};

}  // namespace kamera
