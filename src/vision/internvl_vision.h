// The vision tower of InternVL 2.5 / 3 (InternViT-300M: a ViT with a class token and layer scales,
// a pixel shuffle and an MLP projector), as llama.cpp's mmproj GGUF holds it (projector type
// "internvl"), and its weights.
//
// What the tower computes on one tile of image_size x image_size pixels (Hugging Face's
// modeling_intern_vit.py and modeling_internvl_chat.py), as llama.cpp d32676d's clip graph
// (models/internvl.cpp) computes it:
//   patches  side x side patches of patch x patch pixels, raster order, each flattened
//            (channel, py, px); pixels (v / 255 - mean) / std (vision/siglip.h's patches)
//   embed    x_i = W_pe p_i + b_pe + pos[i] for the patches i < n, then the class token
//            x_n = cls + pos[n] as the last row (llama.cpp's order; Hugging Face puts the class
//            token first and adds pos[0] to it, pos[i + 1] to patch i: docs/VISION.md)
//   block    x += ls1 * (W_o Attn(W_q m + b, W_k m + b, W_v m + b) + b_o),  m = LN1(x)
//            x += ls2 * (W_fc2 gelu(W_fc1 LN2(x) + b) + b)          (pre-LN, eps from the file)
//   attend   bidirectional over the n + 1 rows, scale 1/sqrt(head_dim)
//   shuffle  the class row dropped; each s x s block of patches (s = scale) becomes one row of
//            s * s * dim values, (dy, dx, channel) order, blocks in raster order
//            ((side / s)^2 rows: 448 / 14 = 32 a side, s = 2: 256 rows)
//   project  y = W_3 gelu(W_1 LN(row) + b_1) + b_3      (LN eps 1e-5, PyTorch's default)
// gelu is the tanh form both ways: llama.cpp's FFN_GELU (Hugging Face's InternViT and mlp1 use
// the erf form).
//
// The file (general.architecture = "clip"), as llama.cpp's converter (conversion/internvl.py,
// InternVisionModel) writes it; keys kamera reads:
//   clip.projector_type                  "internvl"                          (required)
//   clip.vision.image_size / patch_size / embedding_length / block_count /
//   attention.head_count / feed_forward_length / projection_dim              (required)
//   clip.vision.projector.scale_factor   s = 1 / downsample_ratio            (required)
//   clip.vision.attention.layer_norm_epsilon                                 (default 1e-6)
//   clip.vision.preproc_min_tiles / preproc_max_tiles                        (default 1 / 12)
//   clip.vision.image_mean / image_std   (default ImageNet's)
//   clip.use_gelu                        true (absent or false is refused: llama.cpp would run
//                                        quick-GELU or SiLU)
// Tensors (GGUF names; ne[0] first):
//   v.class_embd [dim, 1, 1]; v.patch_embd.weight [patch, patch, 3, dim]; v.patch_embd.bias [dim]
//   v.position_embd.weight [dim, side * side + 1, 1]
//   v.blk.N.ln1.{weight,bias}, ln2.{weight,bias} [dim]               norm1, norm2
//   v.blk.N.attn_{q,k,v,out}.{weight,bias} [dim, dim], [dim]        attn.qkv (split), attn.proj
//   v.blk.N.ffn_up.{weight,bias} [dim, ffn]; ffn_down.{weight,bias} [ffn, dim]   mlp.fc1, fc2
//   v.blk.N.ls1.weight, ls2.weight [dim]
//   mm.model.mlp.0.{weight,bias} [dim * s * s]; mm.model.mlp.1.{weight,bias} [dim * s * s, out];
//   mm.model.mlp.3.{weight,bias} [out, out]
// InternViT-6B's files (q / k norms, RMSNorm: the 26B..78B models) are refused.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "vision/siglip.h"

namespace kamera {

struct InternvlVisionConfig {
  int image_size = 448;
  int patch = 14;
  int dim = 1024;
  int n_layers = 24;
  int n_heads = 16;
  int ffn_dim = 4096;
  int scale = 2;      // the pixel shuffle's block side
  int out_dim = 896;  // the decoder's width (InternVL3-1B)
  int min_tiles = 1, max_tiles = 12;
  float eps = 1e-6f;  // the ViT's LayerNorms
  static constexpr float kProjectorEps = 1e-5f;
  std::array<float, 3> image_mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> image_std = {0.229f, 0.224f, 0.225f};

  int side() const { return image_size / patch; }
  int n_patches() const { return side() * side(); }
  int rows_side() const { return side() / scale; }
  int rows() const { return rows_side() * rows_side(); }  // rows per tile
  int merged_dim() const { return dim * scale * scale; }
  SiglipDims vit() const {
    return {image_size, patch, dim, n_layers, n_heads, ffn_dim, eps, image_mean, image_std};
  }
  Status validate() const;
};

struct InternvlVisionWeights {
  QwenLinear patch;        // dim x patch_values (channel, py, px), bias: the Conv2d's
  std::vector<float> cls;  // dim
  std::vector<float> pos;  // (n_patches + 1) x dim
  struct Layer {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b, ls1, ls2;
    QwenLinear q, k, v, o, fc1, fc2;
  };
  std::vector<Layer> layers;
  std::vector<float> mm_norm_w, mm_norm_b;  // merged_dim
  QwenLinear mm1, mm3;                      // merged_dim -> out, out -> out
};

struct InternvlVisionModel {
  InternvlVisionConfig cfg;
  InternvlVisionWeights w;
  std::string source;
  std::array<uint64_t, 2> fingerprint{};  // XXH3-128 of the config and every weight
  std::shared_ptr<const void> mapping;    // the mapped file the matrices point into

  // Loads an mmproj GGUF of projector type "internvl" (the layout above).
  static Result<InternvlVisionModel> load(const std::string& path);
};

}  // namespace kamera
