// The vision tower of Qwen2-VL and Qwen2.5-VL, as llama.cpp's mmproj GGUF holds it, and its
// forward in kamera's engine.
//
// What the tower computes (Hugging Face's modeling_qwen2_vl.py / modeling_qwen2_5_vl.py):
//   patches  (t, h, w) grid of 14 x 14 pixel patches, each a pair of frames in time (an image is
//            repeated), flattened (channel, frame, py, px) = 3 x 2 x 14 x 14 = 1176 values, in
//            the merge order (t, h/2, w/2, dy, dx) (vision/qwen_preprocess.h)
//   embed    x = W_pe p                (the Conv3d (2, 14, 14) as one product; no bias)
//   block    x += W_o Attn(rope(q), rope(k), v) (n1 = Norm1(x); q, k, v = W n1 + b)
//            x += FFN(Norm2(x))
//              Qwen2-VL:   LayerNorm, FFN = W_2 quick_gelu(W_1 n + b_1) + b_2
//              Qwen2.5-VL: RMSNorm,   FFN = W_down (silu(W_gate n + b_g) * (W_up n + b_u)) + b_d
//   rope     2-D: the first half of each head's pairs turns by the patch row, the second by its
//            column (ops/vision_ops.h); no time component
//   attend   bidirectional within one temporal slice; Qwen2.5-VL's window layers only within a
//            window of (window / 14 / 2)^2 merged tokens, full attention at the listed layers
//   merge    Norm(x) (LayerNorm | RMSNorm), 4 consecutive patches (a 2 x 2 block) concatenated,
//            y = W_mm2 gelu(W_mm0 m + b0) + b2  (exact erf GELU)   -> rows of the decoder width
//
// The file (general.architecture = "clip"); keys kamera reads:
//   clip.projector_type                 "qwen2vl_merger" (Qwen2-VL) | "qwen2.5vl_merger"
//   clip.vision.embedding_length        tower width                  (required)
//   clip.vision.block_count             layers                       (required)
//   clip.vision.attention.head_count    heads                        (required)
//   clip.vision.patch_size              14                           (required)
//   clip.vision.projection_dim          decoder width; checked against mm.2 (required)
//   clip.vision.attention.layer_norm_epsilon                         (default 1e-6)
//   clip.vision.feed_forward_length     ignored when 0 (llama.cpp's Qwen2-VL surgery writes 0);
//                                       the FFN width is read from the tensors
//   clip.vision.spatial_merge_size      (default 2)
//   clip.vision.image_mean / image_std  (default CLIP's)
//   clip.vision.image_min_pixels / image_max_pixels  (default 3136 / 12845056, the processor's)
//   clip.use_gelu                       Qwen2-VL FFN: true = erf GELU, false/absent = quick GELU
//   Qwen2.5-VL only:
//   clip.vision.n_wa_pattern            full attention at layers l with (l + 1) % n == 0
//                                       (llama.cpp's key, from fullatt_block_indexes)
//   clip.vision.wa_layer_indexes        explicit full-attention layers (later llama.cpp; wins)
//   clip.vision.window_size             window side in pixels (default 112, what llama.cpp fixes)
// Tensors (GGUF names; ne[0] first):
//   v.patch_embd.weight, v.patch_embd.weight.1   [14, 14, 3, dim]  the Conv3d's frames 0 and 1
//   v.patch_embd.bias                            [dim]             optional
//   v.blk.N.ln1/ln2.{weight,bias}                [dim]             bias: Qwen2-VL only
//   v.blk.N.attn_{q,k,v,out}.{weight,bias}       [dim, dim], [dim]
//   Qwen2-VL FFN: v.blk.N.ffn_down, ffn_up       llama.cpp's surgery names fc1 (the INPUT side,
//                 [dim, ffn]) ffn_down and fc2 ([ffn, dim]) ffn_up; later converters swap them.
//                 kamera takes the one whose ne[0] is dim as the input side (ambiguous only when
//                 ffn == dim: then ffn_down when feed_forward_length is 0, else ffn_up).
//   Qwen2.5-VL FFN: v.blk.N.ffn_gate, ffn_up [dim, ffn], ffn_down [ffn, dim] (with biases)
//   v.post_ln.{weight,bias}                      [dim]             the merger's ln_q
//   mm.0.{weight,bias}                           [4 dim, 4 dim], [4 dim]
//   mm.2.{weight,bias}                           [4 dim, out], [out]
//   v.position_embd.weight                       a 10 x 10 placeholder llama.cpp's surgery adds;
//                                                ignored
// The attention, FFN and merger matrices stay in their file's type (F32, F16, BF16, Q8_0, the
// k-quants, ...: model/weight.h), pointing into the mapped file, and every product goes
// through QwenLinear::apply, i.e. linear() and the quantized kernels of ops/quant.h. The patch
// kernels (3 x 14 x 14 per output, rows no quant block fits), the norms and the biases are held
// in f32.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/weight.h"

namespace kamera {

class GgufFile;
class ThreadPool;

enum class QwenVisionVariant : uint8_t { Qwen2VL, Qwen25VL };

// FFN activation of the blocks.
enum class QwenVisionAct : uint8_t { QuickGelu, Gelu, SiluGated };

inline constexpr std::array<float, 3> kClipMean = {0.48145466f, 0.4578275f, 0.40821073f};
inline constexpr std::array<float, 3> kClipStd = {0.26862954f, 0.26130258f, 0.27577711f};

struct QwenVisionConfig {
  QwenVisionVariant variant = QwenVisionVariant::Qwen2VL;
  int patch = 14;
  int temporal_patch = 2;  // fixed by the file format (two kernels)
  int merge = 2;
  int dim = 1280;
  int n_layers = 32;
  int n_heads = 16;
  int ffn_dim = 5120;
  int out_dim = 1536;  // the decoder's embedding width
  float eps = 1e-6f;
  double rope_theta = 10000.0;
  QwenVisionAct act = QwenVisionAct::QuickGelu;
  bool patch_bias = false;
  // Qwen2.5-VL: window side in pixels, and the layers that attend over the whole slice
  int window = 112;
  std::vector<int> full_attention_layers;
  // preprocessing
  std::array<float, 3> image_mean = kClipMean, image_std = kClipStd;
  int64_t min_pixels = 56 * 56, max_pixels = 12845056;

  bool rms_norm() const { return variant == QwenVisionVariant::Qwen25VL; }
  int head_dim() const { return dim / n_heads; }
  int patch_values() const { return 3 * temporal_patch * patch * patch; }
  int merged_width() const { return merge * merge * dim; }
  bool full_attention(int layer) const;
  Status validate() const;
};

// Named shapes: "tiny" (tests: width 64, 2 layers, into a 64-wide decoder), "2b" (Qwen2-VL-2B:
// width 1280, 32 layers, 16 heads, MLP 5120, into 1536), "3b" (Qwen2.5-VL-3B: 1280, 32 layers,
// 16 heads, MLP 3420, full attention at 7, 15, 23, 31, into 2048). arch: "qwen2vl" | "qwen25vl".
std::optional<QwenVisionConfig> qwen_vision_preset(const std::string& arch,
                                                   const std::string& preset);

// A weight product y = W x + b: W is out rows of in values (PyTorch's Linear) in its file's type,
// b empty or out.
struct QwenLinear {
  int in = 0, out = 0;
  Weight w;
  std::vector<float> b;
  // y[n x out] = x[n x in] W^T + b; pool null: the calling thread alone runs the quantized
  // kernels (F32 goes through OpenBLAS, which keeps its own threads)
  void apply(const float* x, int n, float* y, ThreadPool* pool) const;
};

struct QwenVisionWeights {
  std::vector<float> patch0, patch1;  // dim x (3 x 14 x 14) each, as in the file
  std::vector<float> patch_b;         // dim, or empty
  QwenLinear patch;                   // dim x 1176 in (channel, frame, py, px) order (derived)
  struct Layer {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;  // biases empty for RMSNorm
    QwenLinear q, k, v, o;
    QwenLinear gate, up, down;  // Qwen2-VL: up = fc1 (in), down = fc2 (out); gate unused
  };
  std::vector<Layer> layers;
  std::vector<float> post_ln_w, post_ln_b;
  QwenLinear mm0, mm2;
};

struct QwenVisionModel {
  QwenVisionConfig cfg;
  QwenVisionWeights w;
  std::string source;
  std::array<uint64_t, 2> fingerprint{};  // XXH3-128 of the config and every weight
  // The mapped file the matrices of a loaded tower point into (shared by copies); null for a
  // tower built in memory, whose matrices own their bytes.
  std::shared_ptr<const GgufFile> mapping;

  // Loads an mmproj GGUF (llama.cpp's layout above). Errors name the file and the problem.
  static Result<QwenVisionModel> load(const std::string& path);
  // Writes the file in llama.cpp's conventions: Qwen2-VL as c392e50's qwen2_vl_surgery.py does
  // (ffn_down = input side, feed_forward_length 0, a position_embd placeholder), Qwen2.5-VL as
  // later convert_hf_to_gguf.py does. 2-D weights in weight_type (F32, F16; the patch kernels
  // too), norms and biases F32. Q8_0: the matrices in Q8_0, the patch kernels in F16 (their rows
  // of 14 fit no block), norms and biases F32.
  Status write_gguf(const std::string& path, DType weight_type) const;
  // Seeded random weights of the given shape (tests and benchmarks).
  static QwenVisionModel random(const QwenVisionConfig& cfg, uint64_t seed);
  // Builds the derived tensors (the combined patch matrix) and the fingerprint.
  void finish();
  Status check_shapes() const;
  // Bytes of the weight matrices as held (QwenLinear::w, the patch matrix in f32 included).
  size_t weight_bytes() const;
};

}  // namespace kamera
