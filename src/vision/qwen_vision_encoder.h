// The forward of the Qwen2-VL / Qwen2.5-VL / Qwen3-VL vision tower (the math is in qwen_vision.h):
// patches of one image or video -> one row of the decoder's width per merged 2 x 2 block.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "vision/qwen_preprocess.h"
#include "vision/qwen_vision.h"

namespace kamera {

class ThreadPool;

// grid_t x grid_h x grid_w rows (grid_h, grid_w in merged tokens), raster order per temporal
// slice; each row is `dim` floats: the decoder's width, or Qwen3-VL's 1 + N deepstack slices of
// it (QwenVisionConfig::embed_width).
struct QwenVisionEmbeddings {
  int grid_t = 0, grid_h = 0, grid_w = 0;
  int dim = 0;
  std::vector<float> rows;

  int64_t n_rows() const { return int64_t(grid_t) * grid_h * grid_w; }
};

class QwenVisionEncoder {
 public:
  // pool may be null (single thread for kamera's own kernels; OpenBLAS keeps its threads).
  QwenVisionEncoder(const QwenVisionModel& model, ThreadPool* pool) : m_(model), pool_(pool) {}

  // Each temporal slice attends only within itself (as the model's cu_seqlens do), so a video
  // of t slices costs t images.
  Result<QwenVisionEmbeddings> encode(const QwenPatches& in);
  // Asked before each layer of each slice: true stops the encode (an InvalidArgument saying so),
  // e.g. when the client that asked for it has left. Empty: never.
  void set_stop(std::function<bool()> stop) { stop_ = std::move(stop); }

  // The patch (row, col) of every patch of one slice in the order the tower holds them
  // ((h/m, w/m, m, m) blocks), and the Qwen2.5-VL attention windows over that order
  // (member lists; one group of all patches for full attention).
  static void patch_positions(int grid_h, int grid_w, int merge, std::vector<int32_t>* row,
                              std::vector<int32_t>* col);
  static void window_groups(const QwenVisionConfig& c, int grid_h, int grid_w,
                            std::vector<int32_t>* members, std::vector<int32_t>* offsets);
  // Qwen3-VL's position resampling along one side: n grid indices into a table of `side`,
  // their lower and upper table rows and the fraction between them (HF's linspace in f32).
  static void position_weights(int side, int n, std::vector<int32_t>* lo, std::vector<int32_t>* hi,
                               std::vector<float>* frac);

 private:
  bool encode_slice(const float* patches, int grid_h, int grid_w, float* out);  // false: stopped
  void add_positions(int grid_h, int grid_w);
  void merger_mlp(const float* normed, const QwenLinear& fc1, const QwenLinear& fc2, int nt,
                  float* out, int stride);
  void block(const QwenVisionWeights::Layer& L, bool full, int n);

  const QwenVisionModel& m_;
  ThreadPool* pool_;
  std::function<bool()> stop_;
  // scratch, n = patches of one slice: x, nrm, q, k, v, att (n x dim); h1, h2 (n x ffn)
  std::vector<float> x_, nrm_, q_, k_, v_, att_, h1_, h2_, merged_, attn_scratch_;
  std::vector<int32_t> row_, col_, all_members_, all_offsets_, win_members_, win_offsets_;
};

}  // namespace kamera
