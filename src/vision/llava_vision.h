// The vision tower of LLaVA-1.5 (a CLIP ViT with a class token and a pre-layernorm, read at the
// feature layer, and a two-layer MLP projector), as llama.cpp's mmproj GGUF holds it (projector
// type "mlp", written by tools/mtmd/legacy-models/convert_image_encoder_to_gguf.py
// --llava-projector), and its weights.
//
// What the tower computes on one picture of image_size x image_size pixels (Hugging Face's
// modeling_clip.py and modeling_llava.py), as llama.cpp d32676d's clip graph (models/llava.cpp)
// computes it:
//   patches  side x side patches of patch x patch pixels, raster order, each flattened
//            (channel, py, px); pixels (v / 255 - mean) / std (vision/siglip.h's patches)
//   embed    x_i = W_pe p_i + pos[i] for the patches i < n (no bias), then the class token
//            x_n = cls + pos[n] as the last row (llama.cpp's order; Hugging Face puts the class
//            token first with pos[0] and adds pos[i + 1] to patch i: docs/VISION.md)
//   pre-LN   x = LN_pre(x)
//   block    x += W_o Attn(W_q m + b, W_k m + b, W_v m + b) + b_o,  m = LN1(x)
//            x += W_fc2 act(W_fc1 LN2(x) + b) + b       (pre-LN, eps from the file; act is
//            quick-GELU x sigmoid(1.702 x), or GELU's tanh form where clip.use_gelu is true)
//   attend   bidirectional over the n + 1 rows, scale 1/sqrt(head_dim)
//   layers   the file's first `layers` blocks: clip.vision.feature_layer where the file has it
//            (the converter writes LLaVA's mm_vision_select_layer = -2 as block_count and keeps
//            that many blocks: the penultimate hidden state), else block_count - 1 as llama.cpp
//   select   rows 1 .. n of the n + 1 (llama.cpp's: patches 1 .. n - 1 and the class token's
//            row; Hugging Face's: the n patches, the class row dropped)
//   project  y = W_2 gelu(W_0 row + b_0) + b_2   (GELU's tanh form: llama.cpp's ggml_gelu;
//            Hugging Face's projector uses the erf form)
//
// MobileVLM's projectors (llama.cpp's "ldp" and "ldpv2", the converter's --projector-type) in
// place of the MLP, on the same tower: the MLP, then the blocks of vision/llava_ldp.h; (side/2)^2
// rows.
//
// Keys kamera reads:
//   clip.projector_type                  "mlp", "ldp" or "ldpv2"                    (required)
//   clip.vision.image_size / patch_size / embedding_length / block_count /
//   attention.head_count / feed_forward_length / projection_dim                    (required)
//   clip.vision.feature_layer            one index in 1 .. block_count              (optional)
//   clip.vision.attention.layer_norm_epsilon                                        (default 1e-5)
//   clip.vision.image_mean / image_std   (default CLIP's)
//   clip.use_gelu                        true: GELU (tanh); absent or false: quick-GELU
//   clip.vision.image_grid_pinpoints     LLaVA-1.6's any-resolution grid: pairs of pixels, each a
//            multiple of image_size (vision/llava_anyres.h); with it the file must hold the
//            newline row (below)
//   clip.vision.mm_patch_merge_type      absent or "spatial_unpad" (LLaVA-1.6's; "flat" refused)
//   clip.use_silu true and several feature layers (Granite Vision) are refused.
// Tensors (GGUF names; ne[0] first):
//   v.class_embd [dim]; v.patch_embd.weight [patch, patch, 3, dim] (no bias)
//   v.position_embd.weight [dim, side * side + 1]; v.pre_ln.{weight,bias} [dim]
//   v.blk.N.ln1.{weight,bias}, ln2.{weight,bias} [dim]              layer_norm1, layer_norm2
//   v.blk.N.attn_{q,k,v,out}.{weight,bias} [dim, dim], [dim]        q/k/v/out_proj
//   v.blk.N.ffn_down.{weight,bias} [dim, ffn]; ffn_up.{weight,bias} [ffn, dim]  mlp.fc1, fc2 (the
//            legacy converter's names; a file naming them the other way round, ffn_up [dim, ffn],
//            is read alike, as llama.cpp swaps them back)
//   mm.0.{weight,bias} [dim, out]; mm.2.{weight,bias} [out, out]     (mlp)
//   mm.model.mlp.0.{weight,bias} [dim, out]; mm.model.mlp.2.{weight,bias} [out, out];
//   mm.model.peg.0.weight [3, 3, out] (the converter squeezes torch's [out, 1, 3, 3]; [3, 3, 1,
//   out] is read alike), mm.model.peg.0.bias [out]                    (ldpv2)
//   mm.model.mlp.1 [dim, out], mm.model.mlp.3 [out, out]; per block B of 1, 2,
//   mm.model.mb_block.B.block.0.0.weight [3, 3, out] (depthwise), block.0.1.{weight,bias} [out],
//   block.1.fc1.{weight,bias} [out, sq], [sq], block.1.fc2.{weight,bias} [sq, out], [out],
//   block.2.0.weight [out, out] (pointwise), block.2.1.{weight,bias} [out]     (ldp)
//   model.image_newline [out]   LLaVA-1.6's row after each line of the grid's features (the
//            legacy converter keeps the checkpoint's name; v.image_newline is read alike)
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "vision/siglip.h"

namespace kamera {

enum class LlavaProjector { kMlp, kLdp, kLdpV2 };

struct LlavaVisionConfig {
  int image_size = 336;
  int patch = 14;
  int dim = 1024;
  int n_layers = 23;  // the blocks in the file
  int layers = 23;    // the blocks run: the feature layer
  int n_heads = 16;
  int ffn_dim = 4096;
  int out_dim = 4096;      // the decoder's width (LLaVA-1.5 7B)
  bool gelu_tanh = false;  // the ViT's MLP: GELU (tanh) if true, quick-GELU otherwise
  bool fc1_is_up = false;  // the file names mlp.fc1 ffn_up (the converter's own: ffn_down)
  float eps = 1e-5f;
  std::array<float, 3> image_mean = {0.48145466f, 0.4578275f, 0.40821073f};
  std::array<float, 3> image_std = {0.26862954f, 0.26130258f, 0.27577711f};
  // LLaVA-1.6: the file's pinpoints as written (first, second); empty for LLaVA-1.5
  std::vector<std::array<int, 2>> pinpoints;
  std::string newline_tensor;  // the newline row's name in the file (with pinpoints)

  LlavaProjector projector = LlavaProjector::kMlp;
  bool peg_4d = false;  // ldpv2: mm.model.peg.0.weight is [3, 3, 1, out]
  int ldp_squeeze = 0;  // ldp: the squeeze-excitation's width

  bool anyres() const { return !pinpoints.empty(); }
  bool mobilevlm() const { return projector != LlavaProjector::kMlp; }
  int side() const { return image_size / patch; }
  int n_patches() const { return side() * side(); }
  int rows() const { return mobilevlm() ? (side() / 2) * (side() / 2) : n_patches(); }
  SiglipDims vit() const {
    return {image_size, patch, dim, n_layers, n_heads, ffn_dim, eps, image_mean, image_std};
  }
  Status validate() const;
};

struct LlavaVisionWeights {
  QwenLinear patch;        // dim x patch_values (channel, py, px), no bias
  std::vector<float> cls;  // dim
  std::vector<float> pos;  // (n_patches + 1) x dim
  std::vector<float> pre_ln_w, pre_ln_b;
  struct Layer {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;
    QwenLinear q, k, v, o, fc1, fc2;
  };
  std::vector<Layer> layers;
  QwenLinear mm0, mm2;         // dim -> out, out -> out
  std::vector<float> newline;  // out (LLaVA-1.6)
  std::vector<float> peg_w;    // out x 3 x 3 (ldpv2)
  std::vector<float> peg_b;    // out (ldpv2)
  struct LdpBlock {            // (ldp)
    std::vector<float> dw;     // out x 3 x 3
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;
    QwenLinear fc1, fc2, pw;  // out -> sq -> out; out -> out (no bias)
  };
  LdpBlock ldp[2];
};

struct LlavaVisionModel {
  LlavaVisionConfig cfg;
  LlavaVisionWeights w;
  std::string source;
  std::array<uint64_t, 2> fingerprint{};  // XXH3-128 of the config and every weight
  std::shared_ptr<const void> mapping;    // the mapped file the matrices point into

  // Loads an mmproj GGUF of projector type "mlp" (LLaVA-1.5 or 1.6), "ldp" (MobileVLM) or "ldpv2"
  // (MobileVLM V2).
  static Result<LlavaVisionModel> load(const std::string& path);
};

}  // namespace kamera
