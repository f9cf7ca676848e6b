// The forward of SmolVLM's tower (the math is in idefics3_vision.h): one tile of image_size x
// image_size pixels -> its tile_rows() rows of the decoder's width, raster order of the shuffled
// blocks.
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "vision/idefics3_vision.h"
#include "vision/siglip.h"

namespace kamera {

class ThreadPool;

class Idefics3VisionEncoder {
 public:
  // pool may be null (one thread for kamera's own kernels; OpenBLAS keeps its threads).
  Idefics3VisionEncoder(const Idefics3VisionModel& model, ThreadPool* pool)
      : m_(model), vit_(model.cfg.siglip(), model.w.vit, pool), pool_(pool) {}

  // tile_rows() x out_dim rows.
  Result<std::vector<float>> encode(const Image& tile);
  // Asked before each layer: true stops the encode (an InvalidArgument saying so). Empty: never.
  void set_stop(std::function<bool()> stop) { stop_ = std::move(stop); }

 private:
  const Idefics3VisionModel& m_;
  SiglipEncoder vit_;
  ThreadPool* pool_;
  std::function<bool()> stop_;
  std::vector<float> merged_;
};

}  // namespace kamera
