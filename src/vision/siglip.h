// The SigLIP vision encoder that SmolVLM's (vision/idefics3_vision.h) and Gemma 3's
// (vision/gemma3_vision.h) towers share, as llama.cpp's mmproj GGUF holds it, and its forward on
// one square picture of image_size pixels (Hugging Face's modeling_siglip.py):
//   patches  side x side patches of patch x patch pixels (side = image_size / patch, pixels past
//            side * patch unread, as the stride-patch Conv2d leaves them), raster order, each
//            flattened (channel, py, px); pixels (v / 255 - mean) / std
//   embed    x = W_pe p + b_pe + pos[i]        (the learned side^2 table as is)
//   block    x += W_o Attn(W_q n + b, W_k n + b, W_v n + b) + b_o,   n = LN1(x)
//            x += W_fc2 gelu_tanh(W_fc1 LN2(x) + b) + b                (pre-LN, eps from the file)
//   attend   bidirectional over the picture's patches, scale 1/sqrt(head_dim)
//   final    LN(x) (post_layernorm)
// Tensors (GGUF names; ne[0] first):
//   v.patch_embd.weight [patch, patch, 3, dim]; v.patch_embd.bias [dim]
//   v.position_embd.weight [dim, side * side]
//   v.blk.N.ln1.{weight,bias}, ln2.{weight,bias} [dim]      layer_norm1, layer_norm2
//   v.blk.N.attn_{q,k,v,out}.{weight,bias} [dim, dim], [dim]
//   v.blk.N.ffn_up.{weight,bias} [dim, ffn]; ffn_down.{weight,bias} [ffn, dim]   mlp.fc1, fc2
//   v.post_ln.{weight,bias} [dim]
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "vision/qwen_vision.h"  // QwenLinear: a product in its file's type

namespace kamera {

class GgufFile;
class ThreadPool;

struct SiglipDims {
  int image_size = 0, patch = 0, dim = 0, n_layers = 0, n_heads = 0, ffn_dim = 0;
  float eps = 1e-6f;
  std::array<float, 3> image_mean{}, image_std{};

  int side() const { return image_size / patch; }
  int n_patches() const { return side() * side(); }
  int head_dim() const { return dim / n_heads; }
  int patch_values() const { return 3 * patch * patch; }
};

struct SiglipWeights {
  QwenLinear patch;        // dim x patch_values (channel, py, px), bias: the Conv2d's
  std::vector<float> pos;  // (side * side) x dim
  struct Layer {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;
    QwenLinear q, k, v, o, fc1, fc2;
  };
  std::vector<Layer> layers;
  std::vector<float> post_ln_w, post_ln_b;
};

// One tensor of an mmproj file: a product's matrix (lin, its bias a separate entry) or an f32
// vector (vec).
struct ClipTensor {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order
  std::vector<float>* vec = nullptr;
  QwenLinear* lin = nullptr;
};

// Appends a product's entries to `out`: `name`.weight of shape ne into l (sized in x out_dim) and
// `name`.bias [out_dim] into l.b.
void clip_linear(std::vector<ClipTensor>& out, const std::string& name, QwenLinear& l, int in,
                 int out_dim, std::vector<int64_t> ne);
// Appends an f32 vector's entry (`name` of shape ne into v) to `out`.
void clip_vector(std::vector<ClipTensor>& out, const std::string& name, std::vector<float>& v,
                 std::vector<int64_t> ne);

// Appends the encoder's tensors (the list above) to `out`, pointing into w (its layers sized).
void siglip_tensors(const SiglipDims& d, SiglipWeights& w, std::vector<ClipTensor>& out);

// Reads every tensor of `specs` from g: a matrix borrowed from the mapping in its file type, a
// vector as f32. Errors: a tensor missing or of another shape; a file with tensors the list does
// not name (family names the tower in that message). own_prefixes (empty: every tensor) limits
// that last check to the tensors whose names start with one of them: the tower's half of a file
// that holds two (Qwen2.5-Omni's vision and audio encoders).
Status load_clip_tensors(const GgufFile& g, const std::string& path,
                         const std::vector<ClipTensor>& specs, const char* family,
                         std::span<const std::string_view> own_prefixes = {});

// XXH3-128 of a tower: its projector type, its config's integers and reals, and each tensor's
// type and bytes (vectors: length and values).
std::array<uint64_t, 2> clip_fingerprint(const char* projector, std::span<const int> ints,
                                         std::span<const float> reals,
                                         const std::vector<ClipTensor>& specs);

// The encoder's own checks: width and heads, layers, MLP, epsilon, std (InvalidArgument naming
// family otherwise).
Status validate_siglip(const SiglipDims& d, const char* family);

// The picture's patches, (side * side) x patch_values, normalized in f32. Errors: a picture that
// is not image_size x image_size.
Result<std::vector<float>> siglip_patches(const Image& img, const SiglipDims& d,
                                          const char* family);

// The encoder's forward; holds its scratch between calls. Not thread-safe.
class SiglipEncoder {
 public:
  // pool may be null (one thread for kamera's own kernels; OpenBLAS keeps its threads).
  SiglipEncoder(const SiglipDims& dims, const SiglipWeights& w, ThreadPool* pool)
      : d_(dims), w_(w), pool_(pool) {}

  // n_patches x dim rows after the post-layernorm. stop (may be empty) is asked before each
  // layer: true ends the encode with an InvalidArgument naming family.
  Result<std::vector<float>> encode(const Image& img, const std::function<bool()>& stop,
                                    const char* family);

 private:
  void block(const SiglipWeights::Layer& L, int n);

  SiglipDims d_;
  const SiglipWeights& w_;
  ThreadPool* pool_;
  std::vector<float> x_, nrm_, q_, k_, v_, att_, h1_, attn_scratch_;
  std::vector<int32_t> members_, offsets_;
};

}  // namespace kamera
