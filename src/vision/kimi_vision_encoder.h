// The forward of Kimi-VL's MoonViT tower and projector (the math is in kimi_vision.h): the
// patches of one image -> one row of the decoder's width per 2 x 2 block, raster order.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "vision/kimi_preprocess.h"
#include "vision/kimi_vision.h"

namespace kamera {

class ThreadPool;

struct KimiVisionEmbeddings {
  int grid_h = 0, grid_w = 0;  // merged tokens
  int dim = 0;
  std::vector<float> rows;  // (grid_h * grid_w) x dim

  int64_t n_rows() const { return int64_t(grid_h) * grid_w; }
};

// The learned position table (side x side rows of dim) resized to h x w as torch's
// F.interpolate(mode="bicubic", align_corners=False) does (cubic kernel a = -0.75, source
// coordinates (i + 0.5) * in / out - 0.5, border indices clamped); the table itself when the
// sizes agree. out: (h * w) x dim.
void kimi_resize_positions(const float* table, int side, int dim, int h, int w, float* out);

// MoonViT's 2-D rotary embedding in place on n tokens of n_heads heads of head_dim values: the
// pair (2j, 2j + 1) turns by col[t] * theta^(-4i/head_dim) for j = 2i and by row[t] * the same
// for j = 2i + 1.
void kimi_rope(float* x, int n, int n_heads, int head_dim, const int32_t* row, const int32_t* col,
               double theta, ThreadPool* pool);

class KimiVisionEncoder {
 public:
  // pool may be null (one thread for kamera's own kernels; OpenBLAS keeps its threads).
  KimiVisionEncoder(const KimiVisionModel& model, ThreadPool* pool) : m_(model), pool_(pool) {}

  Result<KimiVisionEmbeddings> encode(const KimiPatches& in);
  // Asked before each layer: true stops the encode (an InvalidArgument saying so). Empty: never.
  void set_stop(std::function<bool()> stop) { stop_ = std::move(stop); }

 private:
  void block(const KimiVisionWeights::Layer& L, int n);

  const KimiVisionModel& m_;
  ThreadPool* pool_;
  std::function<bool()> stop_;
  std::vector<float> x_, nrm_, q_, k_, v_, att_, h1_, merged_, pos_, attn_scratch_;
  std::vector<int32_t> row_, col_, members_, offsets_;
};

}  // namespace kamera
