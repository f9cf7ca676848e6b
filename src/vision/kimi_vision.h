// The vision tower of Kimi-VL (MoonViT and its projector), as llama.cpp's mmproj GGUF holds it
// (projector type "kimivl"), and its weights in kamera.
//
// What the tower computes (Hugging Face's modeling_kimi_vl.py, MoonVitPretrainedModel and
// KimiVLMultiModalProjector):
//   patches  an (h, w) grid of 14 x 14 pixel patches at the image's own resolution, raster order,
//            each flattened (channel, py, px) = 588 values (vision/kimi_preprocess.h)
//   embed    x = W_pe p + b_pe + pos(h, w)   (the Conv2d as one product; pos: a learned
//            pos_side^2 table, used as is when the grid is that size, else resized to (h, w)
//            by torch's bicubic interpolation, align_corners false)
//   block    x += W_o Attn(rope(q), rope(k), v) + b_o,  q, k, v = W LN0(x) + b (LayerNorm, eps)
//            x += W_fc1 gelu_tanh(W_fc0 LN1(x) + b_fc0) + b_fc1
//   rope     2-D, interleaved: the complex pair j = dims (2j, 2j + 1) of each head turns by
//              col * theta^(-4i/head_dim)  for j = 2i      (x, the patch's column)
//              row * theta^(-4i/head_dim)  for j = 2i + 1  (y, its row),    theta 10000
//   attend   bidirectional over all patches of the image, scale 1/sqrt(head_dim)
//   final    LN(x) (the encoder's final_layernorm)
//   merge    each 2 x 2 block of patches ((dy, dx) row-major) becomes one token:
//            y = W_2 gelu_erf(W_1 [LN_p(x_00); LN_p(x_01); LN_p(x_10); LN_p(x_11)] + b_1) + b_2
//            (LN_p: the projector's pre_norm, eps 1e-5, applied to each patch before the concat)
//
// The file (general.architecture = "clip"), as llama.cpp's converter (conversion/kimivl.py)
// writes it; keys kamera reads:
//   clip.projector_type                 "kimivl"                             (required)
//   clip.vision.embedding_length        tower width                          (required)
//   clip.vision.block_count             layers                               (required)
//   clip.vision.attention.head_count    heads                                (required)
//   clip.vision.feed_forward_length     MLP width; checked against ffn_up    (required)
//   clip.vision.patch_size              14                                   (required)
//   clip.vision.projection_dim          decoder width; checked against mm.2  (required)
//   clip.vision.attention.layer_norm_epsilon                                 (default 1e-5)
//   clip.vision.projector.scale_factor  the merge (default 2)
//   clip.vision.image_mean / image_std  (default 0.5 / 0.5, the processor's)
//   clip.use_gelu                       true (the converter writes it; false is refused)
//   clip.vision.image_size              64 x 14 (written for llama.cpp; not read: the position
//                                       table is square, its side the root of its rows)
//   clip.vision.image_max_pixels        in_token_limit x 14 x 14: the processor downscales an
//                                       image of more patches (default 4096 patches; llama.cpp's
//                                       kimivl ignores the key and fixes 1024 merged tokens)
// Tensors (GGUF names; ne[0] first):
//   v.patch_embd.weight    [14, 14, 3, dim]   the Conv2d kernel      v.patch_embd.bias    [dim]
//   v.position_embd.weight [dim, side * side]  row r = (r / side, r % side) of the table
//   v.blk.N.ln1.{weight,bias}, ln2.{weight,bias}   [dim]             norm0, norm1
//   v.blk.N.attn_{q,k,v,out}.{weight,bias}         [dim, dim], [dim]  wqkv split in three, wo
//   v.blk.N.ffn_up.{weight,bias} [dim, ffn]; ffn_down.{weight,bias} [ffn, dim]   fc0, fc1
//   v.post_ln.{weight,bias}                        [dim]             final_layernorm
//   mm.input_norm.weight / mm.input_norm.bias      [dim]             the projector's pre_norm
//   mm.1.{weight,bias} [4 dim, 4 dim]; mm.2.{weight,bias} [4 dim, out]   linear_1, linear_2
//
// Where llama.cpp d32676d departs from the model (docs/VISION.md, measured in tests): it rotates
// the first half of each head by the column and the second half by the row (build_rope_2d)
// without permuting wq/wk at conversion, so on a converted file its pairs take other angles than
// the model's; it resizes the position table bilinearly (antialiased), not bicubically; its
// projector GELU is the tanh form, the model's is erf.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "vision/qwen_vision.h"  // QwenLinear: a product in its file's type

namespace kamera {

class GgufFile;

inline constexpr std::array<float, 3> kKimiMean = {0.5f, 0.5f, 0.5f};
inline constexpr std::array<float, 3> kKimiStd = {0.5f, 0.5f, 0.5f};

struct KimiVisionConfig {
  int patch = 14;
  int merge = 2;
  int dim = 1152;
  int n_layers = 27;
  int n_heads = 16;
  int ffn_dim = 4304;
  int out_dim = 2048;      // the decoder's width
  int pos_side = 64;       // the learned position table is pos_side x pos_side
  float eps = 1e-5f;       // the tower's LayerNorms
  float proj_eps = 1e-5f;  // the projector's pre_norm (nn.LayerNorm's default in the model)
  double rope_theta = 10000.0;
  // preprocessing (KimiVLImageProcessor, vision/kimi_preprocess.h)
  std::array<float, 3> image_mean = kKimiMean, image_std = kKimiStd;
  int in_token_limit = 4096;  // patches

  int head_dim() const { return dim / n_heads; }
  int patch_values() const { return 3 * patch * patch; }
  int merged_width() const { return merge * merge * dim; }
  Status validate() const;
};

// "tiny" (tests: width 64, 2 layers, 4 heads, MLP 96, patch 14, an 8 x 8 position table, into a
// 64-wide decoder), "a3b" (Kimi-VL-A3B's MoonViT: width 1152, 27 layers, 16 heads, MLP 4304,
// 64 x 64 table, into 2048).
std::optional<KimiVisionConfig> kimi_vision_preset(const std::string& preset);

struct KimiVisionWeights {
  QwenLinear patch;        // dim x 588 (channel, py, px), bias: the Conv2d's
  std::vector<float> pos;  // (pos_side * pos_side) x dim
  struct Layer {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;
    QwenLinear q, k, v, o, fc0, fc1;
  };
  std::vector<Layer> layers;
  std::vector<float> post_ln_w, post_ln_b;
  std::vector<float> mm_norm_w, mm_norm_b;
  QwenLinear mm1, mm2;
};

struct KimiVisionModel {
  KimiVisionConfig cfg;
  KimiVisionWeights w;
  std::string source;
  std::array<uint64_t, 2> fingerprint{};  // XXH3-128 of the config and every weight
  std::shared_ptr<const void> mapping;    // the mapped file the matrices point into, or null

  // Loads an mmproj GGUF of projector type "kimivl" (the layout above).
  static Result<KimiVisionModel> load(const std::string& path);
  // Writes it in llama.cpp's layout: matrices in weight_type (f32, f16, q8_0), the patch kernel
  // f32 (f16 beside f16 / q8_0 matrices), position table, norms and biases f32.
  Status write_gguf(const std::string& path, DType weight_type) const;
  static KimiVisionModel random(const KimiVisionConfig& cfg, uint64_t seed);
  // Computes the fingerprint (after the weights are in place).
  void finish();
  int64_t n_parameters() const;
};

}  // namespace kamera
