// The vision tower of SmolVLM / SmolVLM2 (Idefics3: a SigLIP encoder, pixel shuffle and a linear
// projector), as llama.cpp's mmproj GGUF holds it (projector type "idefics3"), and its weights.
//
// What the tower computes on one tile of image_size x image_size pixels (Hugging Face's
// modeling_idefics3.py / modeling_smolvlm.py): the SigLIP encoder of vision/siglip.h (patches,
// learned positions, pre-LN blocks with GELU tanh, post-LN), then
//   shuffle  each s x s block of patches (s = scale_factor) becomes one row of s^2 dim values,
//            patch (dy, dx) of the block at offset (dy s + dx) dim; blocks in raster order
//   project  y = W_fc row                       (modality_projection: no bias)
//
// The file (general.architecture = "clip"), as llama.cpp's converter (conversion/smolvlm.py)
// writes it; keys kamera reads:
//   clip.projector_type                  "idefics3"                          (required)
//   clip.vision.image_size               the tile's side in pixels           (required)
//   clip.vision.patch_size                                                   (required)
//   clip.vision.embedding_length / block_count / attention.head_count /
//   feed_forward_length                                                      (required)
//   clip.vision.projection_dim           the decoder's width; checked against mm.model.fc
//   clip.vision.attention.layer_norm_epsilon                                 (default 1e-6)
//   clip.vision.projector.scale_factor   the shuffle (default 2, the converter's)
//   clip.vision.preproc_image_size       the processor's size.longest_edge (default 4 tiles)
//   clip.vision.image_mean / image_std   (default 0.5 / 0.5)
//   clip.use_gelu                        true (false is refused)
// Tensors: the SigLIP encoder's (vision/siglip.h), and
//   mm.model.fc.weight [dim * s^2, out]
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "vision/siglip.h"

namespace kamera {

struct Idefics3VisionConfig {
  int image_size = 512;  // a tile's side in pixels (SmolVLM2-256M / 500M)
  int patch = 16;
  int dim = 768;
  int n_layers = 12;
  int n_heads = 12;
  int ffn_dim = 3072;
  int scale = 4;            // the pixel shuffle's factor per side
  int out_dim = 576;        // the decoder's width
  int longest_edge = 2048;  // the processor resizes the image's longer side to this
  float eps = 1e-6f;
  std::array<float, 3> image_mean = {0.5f, 0.5f, 0.5f}, image_std = {0.5f, 0.5f, 0.5f};

  int side() const { return image_size / patch; }  // patches per tile side
  int n_patches() const { return side() * side(); }
  int head_dim() const { return dim / n_heads; }
  int patch_values() const { return 3 * patch * patch; }
  int merged_width() const { return scale * scale * dim; }
  SiglipDims siglip() const {
    return {image_size, patch, dim, n_layers, n_heads, ffn_dim, eps, image_mean, image_std};
  }
  int tile_rows() const { return (side() / scale) * (side() / scale); }  // rows per tile
  Status validate() const;
};

struct Idefics3VisionWeights {
  SiglipWeights vit;
  QwenLinear proj;  // out_dim x merged_width, no bias
};

struct Idefics3VisionModel {
  Idefics3VisionConfig cfg;
  Idefics3VisionWeights w;
  std::string source;
  std::array<uint64_t, 2> fingerprint{};  // XXH3-128 of the config and every weight
  std::shared_ptr<const void> mapping;    // the mapped file the matrices point into

  // Loads an mmproj GGUF of projector type "idefics3" (the layout above).
  static Result<Idefics3VisionModel> load(const std::string& path);
};

}  // namespace kamera
