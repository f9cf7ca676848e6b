// The vision tower of Gemma 3 (a SigLIP encoder, 2-D average pooling, the soft-embedding RMS norm
// and a projection into the decoder's width), as llama.cpp's mmproj GGUF holds it (projector type
// "gemma3"), and its weights.
//
// What the tower computes on one picture of image_size x image_size pixels (Hugging Face's
// modeling_gemma3.py, Gemma3MultiModalProjector): the SigLIP encoder of vision/siglip.h (side x
// side patches), then
//   pool     each k x k block of patches (k = pool) averaged: (side / k)^2 rows, raster order
//            (896 / 14 = 64 patches a side, k = 4: 256 rows)
//   norm     RMSNorm(row) * w_soft  (eps: the tower's layer-norm epsilon; the file holds 1 + w,
//            the converter's Gemma3RMSNorm correction)
//   project  y = row W                (W: mm_input_projection_weight, vision width x text width)
//
// The file (general.architecture = "clip"), as llama.cpp's converter (conversion/gemma.py,
// Gemma3VisionModel) writes it; keys kamera reads:
//   clip.projector_type                  "gemma3"                            (required)
//   clip.vision.image_size / patch_size / embedding_length / block_count /
//   attention.head_count / feed_forward_length / projection_dim              (required)
//   clip.vision.attention.layer_norm_epsilon                                 (default 1e-6)
//   clip.vision.projector.scale_factor   the pooling kernel k (default 4; written only for test
//                                        models whose image_seq_length is not side^2 / 16)
//   clip.vision.image_mean / image_std   (default 0.5 / 0.5)
//   clip.use_gelu                        true (false is refused)
// Tensors: the SigLIP encoder's (vision/siglip.h), and
//   mm.soft_emb_norm.weight [dim]
//   mm.input_projection.weight [out, dim]   (the converter forces f16; read as f32)
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "vision/siglip.h"

namespace kamera {

struct Gemma3VisionConfig {
  int image_size = 896;
  int patch = 14;
  int dim = 1152;
  int n_layers = 27;
  int n_heads = 16;
  int ffn_dim = 4304;
  int pool = 4;        // the average pooling's kernel and stride per side
  int out_dim = 2560;  // the decoder's width (Gemma 3 4B)
  float eps = 1e-6f;   // the tower's LayerNorms and the soft-embedding RMSNorm
  std::array<float, 3> image_mean = {0.5f, 0.5f, 0.5f}, image_std = {0.5f, 0.5f, 0.5f};

  int side() const { return image_size / patch; }
  int rows_side() const { return side() / pool; }
  int rows() const { return rows_side() * rows_side(); }  // rows per picture
  SiglipDims siglip() const {
    return {image_size, patch, dim, n_layers, n_heads, ffn_dim, eps, image_mean, image_std};
  }
  Status validate() const;
};

struct Gemma3VisionWeights {
  SiglipWeights vit;
  std::vector<float> soft_norm;  // dim (1 + w)
  std::vector<float> proj_file;  // the file's mm.input_projection.weight as f32, dim x out
  QwenLinear proj;               // out x dim (proj_file transposed), no bias
};

struct Gemma3VisionModel {
  Gemma3VisionConfig cfg;
  Gemma3VisionWeights w;
  std::string source;
  std::array<uint64_t, 2> fingerprint{};  // XXH3-128 of the config and every weight
  std::shared_ptr<const void> mapping;    // the mapped file the matrices point into

  // Loads an mmproj GGUF of projector type "gemma3" (the layout above).
  static Result<Gemma3VisionModel> load(const std::string& path);
};

}  // namespace kamera
