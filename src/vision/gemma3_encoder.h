// The forward of Gemma 3's tower (the math is in gemma3_vision.h): one picture of image_size x
// image_size pixels -> its rows() rows of the decoder's width, raster order of the pooled blocks;
// and the picture the tower reads from any image (the processor's resize).
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "vision/gemma3_vision.h"
#include "vision/siglip.h"

namespace kamera {

class ThreadPool;

// What Gemma3ImageProcessor feeds the tower (do_pan_and_scan off, its default): the image resized
// to image_size x image_size, aspect not kept, with PIL's BILINEAR filter (media/resize.h); a
// picture of that size as it is. llama.cpp's mtmd resizes with its own bilinear (no antialias
// when shrinking), so the two differ on pictures of other sizes (docs/VISION.md).
Result<Image> gemma3_picture(const Image& img, const Gemma3VisionConfig& c);

class Gemma3VisionEncoder {
 public:
  // pool may be null (one thread for kamera's own kernels; OpenBLAS keeps its threads).
  Gemma3VisionEncoder(const Gemma3VisionModel& model, ThreadPool* pool)
      : m_(model), vit_(model.cfg.siglip(), model.w.vit, pool), pool_(pool) {}

  // rows() x out_dim rows of a picture of image_size x image_size (gemma3_picture).
  Result<std::vector<float>> encode(const Image& picture);
  // Asked before each layer: true stops the encode (an InvalidArgument saying so). Empty: never.
  void set_stop(std::function<bool()> stop) { stop_ = std::move(stop); }

 private:
  const Gemma3VisionModel& m_;
  SiglipEncoder vit_;
  ThreadPool* pool_;
  std::function<bool()> stop_;
  std::vector<float> pooled_;
};

}  // namespace kamera
