// The vision encoder of the mini vision-language model, run by kamera's engine: pixels of one
// frame -> patch tokens -> a few bidirectional transformer layers -> a 2 x 2 spatial merge and an
// MLP projector -> rows of the decoder's width on an (h, w) grid, ready to be a chunk.
//
//   patches  p x p x 3 pixels, (v / 255 - 0.5) / 0.5, flattened (py, px, channel)
//   embed    x = W_pe patch + b_pe + pos[i]                     (learned absolute positions)
//   layer    x += W_o MHA(RMSNorm(x)) (q, k, v with bias; every patch sees every patch)
//            x += W_down (silu(W_gate n) * W_up n),  n = RMSNorm(x)
//   merge    RMSNorm each patch, concatenate the 2 x 2 neighbours ((dy, dx) row-major),
//            y = W_2 silu(W_1 m + b_1) + b_2
//
// The file is llama.cpp's mmproj-style split: a separate GGUF with general.architecture "clip"
// (keys clip.vision.*, tensors v.* and mm.*), beside the decoder's GGUF.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace kamera {

struct VisionConfig {
  int image_size = 32;  // square frames
  int patch = 4;
  int dim = 64;
  int n_layers = 2;
  int n_heads = 4;
  int ffn_dim = 128;
  int merge = 2;         // spatial merge (merge x merge patches -> one token)
  int merger_dim = 256;  // hidden width of the projector MLP
  int out_dim = 64;      // the decoder's embedding width
  float eps = 1e-5f;

  int grid() const { return image_size / patch; }  // patches per side
  int n_patches() const { return grid() * grid(); }
  int patch_values() const { return patch * patch * 3; }
  int token_grid() const { return grid() / merge; }  // output tokens per side
  int n_tokens() const { return token_grid() * token_grid(); }
  int head_dim() const { return dim / n_heads; }
  Status validate() const;
};

// Weights, row-major as PyTorch holds them: a Linear(in, out) is out rows of in values.
struct VisionWeights {
  std::vector<float> patch_w, patch_b;  // dim x patch_values, dim
  std::vector<float> pos;               // n_patches x dim
  struct Layer {
    std::vector<float> ln1, wq, bq, wk, bk, wv, bv, wo, bo;  // dim; dim x dim; dim ...
    std::vector<float> ln2, w_gate, w_up, w_down;            // dim; ffn x dim; ffn x dim; dim x ffn
  };
  std::vector<Layer> layers;
  std::vector<float> post_ln;       // dim
  std::vector<float> mm1_w, mm1_b;  // merger_dim x (merge^2 dim), merger_dim
  std::vector<float> mm2_w, mm2_b;  // out_dim x merger_dim, out_dim
};

// One tensor of the file: GGUF name, GGUF shape (ne[0] contiguous) and where its values live.
struct VisionTensor {
  std::string name;
  std::vector<int64_t> ne;
  std::vector<float>* data;
};

struct VisionModel {
  VisionConfig cfg;
  VisionWeights w;

  // Every tensor of the file in a fixed order (sizes the layer list to the config).
  std::vector<VisionTensor> tensors();

  // Loads an mmproj-style GGUF written by write_gguf (errors name the file and the problem).
  static Result<VisionModel> load(const std::string& path);
  Status write_gguf(const std::string& path) const;
  // Seeded random weights of the given shape (tests and benchmarks before training).
  static VisionModel random(const VisionConfig& cfg, uint64_t seed);
  // Checks every tensor has the size the config implies.
  Status check_shapes() const;
};

// Encodes one frame (image_size x image_size x 3 bytes, row-major RGB) into n_tokens rows of
// out_dim floats, row-major over the (h, w) token grid.
class VisionEncoder {
 public:
  explicit VisionEncoder(const VisionModel& model) : m_(model) {}
  const VisionModel& model() const { return m_; }
  Status encode(const uint8_t* rgb, std::vector<float>* out);
  // The patch vectors of a frame (n_patches x patch_values), as the encoder sees them.
  static void patchify(const VisionConfig& cfg, const uint8_t* rgb, float* out);

 private:
  const VisionModel& m_;
  std::vector<float> x_, n_, q_, k_, v_, att_, tmp_, gate_, up_, scores_, merged_, hid_;
};

}  // namespace kamera
