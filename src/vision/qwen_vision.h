// The vision tower of Qwen2-VL, Qwen2.5-VL and Qwen3-VL, as llama.cpp's mmproj GGUF holds it,
// and its forward in kamera's engine. Qwen3-VL's differences are listed after Qwen2.5-VL's keys.
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
//                                       | "qwen2.5o" (Qwen2.5-Omni's file: its vision half is a
//                                       Qwen2.5-VL tower under these keys, as llama.cpp reads it)
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
// Qwen3-VL (clip.projector_type, or Qwen3-Omni's clip.vision.projector_type, "qwen3vl_merger";
// Hugging Face's modeling_qwen3_vl.py, llama.cpp d32676d tools/mtmd/models/qwen3vl.cpp):
//   patches  16 x 16 pixels (32 per merged token), image mean and std 0.5; the Conv3d has a bias
//   embed    x = W_pe p + b + P(r, c): P is a learned table of S x S rows (v.position_embd.weight
//            [dim, S*S]) resampled to the image's patch grid bilinearly with aligned corners
//            (patch row r reads table row r (S - 1) / (grid_h - 1), likewise columns)
//   block    LayerNorm; q, k, v from one fused matrix; FFN = W_2 gelu_tanh(W_1 n + b_1) + b_2
//            (Hugging Face's gelu_pytorch_tanh); full attention within each temporal slice
//   deepstack after each listed block l, the block's output goes through a merger of its own:
//            4 patches side by side -> LayerNorm over 4 dim -> W_2 gelu(W_1 m + b_1) + b_2
//   merge    as Qwen2-VL (LayerNorm over dim, then 2 x 2 patches, exact erf GELU)
//   output   each merged token's row is [merger | deepstack of the first listed layer | ...],
//            (1 + N) x out_dim values: what the qwen3vl decoder reads (model/qwen3vl.h)
//   keys     as above, and the preprocessing bounds default to Hugging Face's Qwen3-VL processor
//            (min 65536, max 16777216 pixels); clip.use_gelu is ignored (the activations are
//            fixed by the architecture)
//   tensors  v.patch_embd.bias, v.position_embd.weight, v.blk.N.attn_qkv.{weight,bias}
//            [dim, 3 dim] (q, k, v rows in that order), ffn_up = fc1 (input side, [dim, ffn]),
//            ffn_down = fc2; v.deepstack.L.{norm,fc1,fc2}.{weight,bias} for each deepstack
//            tower layer L ([4 dim], [4 dim, 4 dim], [4 dim, out]); v.post_ln, mm.0, mm.2 as
//            above. The deepstack layers are the L with such tensors (as llama.cpp finds them;
//            its converter's clip.vision.is_deepstack_layers is not needed).
//   llama.cpp computes both mergers' GELU with ggml_gelu (the tanh form, through an fp16 table
//   on the CPU) where Hugging Face's nn.GELU() is erf; kamera follows Hugging Face.
//
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
#include "model/config.h"
#include "model/weight.h"

namespace kamera {

class GgufFile;
class ThreadPool;

enum class QwenVisionVariant : uint8_t { Qwen2VL, Qwen25VL, Qwen3VL };

// FFN activation of the blocks.
enum class QwenVisionAct : uint8_t { QuickGelu, Gelu, SiluGated, GeluTanh };

// Hugging Face's Qwen3-VL processor bounds (preprocessor_config.json size.shortest_edge and
// longest_edge) and image mean / std.
inline constexpr int64_t kQwen3VlMinPixels = 65536, kQwen3VlMaxPixels = 16777216;
inline constexpr std::array<float, 3> kHalf = {0.5f, 0.5f, 0.5f};

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
  // Qwen3-VL: the learned position table's rows (a square, 0: none) and the deepstack layers
  int n_pos_embd = 0;
  std::vector<int> deepstack_layers;  // ascending
  // preprocessing
  std::array<float, 3> image_mean = kClipMean, image_std = kClipStd;
  int64_t min_pixels = 56 * 56, max_pixels = 12845056;

  bool rms_norm() const { return variant == QwenVisionVariant::Qwen25VL; }
  bool qwen3() const { return variant == QwenVisionVariant::Qwen3VL; }
  int pos_side() const;  // sqrt(n_pos_embd)
  // Width of an output row: out_dim, times 1 + the deepstack layers (Qwen3-VL)
  int embed_width() const { return out_dim * (1 + int(deepstack_layers.size())); }
  int head_dim() const { return dim / n_heads; }
  int patch_values() const { return 3 * temporal_patch * patch * patch; }
  int merged_width() const { return merge * merge * dim; }
  bool full_attention(int layer) const;
  Status validate() const;
};

// Named shapes: "tiny" (tests: width 64, 2 layers, into a 64-wide decoder), "2b" (Qwen2-VL-2B:
// width 1280, 32 layers, 16 heads, MLP 5120, into 1536), "3b" (Qwen2.5-VL-3B: 1280, 32 layers,
// 16 heads, MLP 3420, full attention at 7, 15, 23, 31, into 2048). arch: "qwen2vl" | "qwen25vl" |
// "qwen3vl": "tiny" (width 64, 3 layers, deepstack after 0 and 1, a 4 x 4 position table, into
// the 64-wide tiny qwen3vl decoder), "2b" (Qwen3-VL-2B: 1024, 24 layers, 16 heads, MLP 4096,
// deepstack 5, 11, 17, 48 x 48 positions, into 2048), "30b-a3b" (Qwen3-VL-30B-A3B: 1152, 27
// layers, 16 heads, MLP 4304, deepstack 8, 16, 24, into 2048).
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
  std::vector<float> pos_embd;        // Qwen3-VL: n_pos_embd x dim
  struct Layer {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;  // biases empty for RMSNorm
    QwenLinear q, k, v, o;                          // Qwen3-VL: rows of the file's fused attn_qkv
    QwenLinear gate, up, down;  // Qwen2-VL: up = fc1 (in), down = fc2 (out); gate unused
  };
  std::vector<Layer> layers;
  struct Deepstack {                    // Qwen3-VL: the merger of one deepstack layer's output
    std::vector<float> norm_w, norm_b;  // 4 dim
    QwenLinear fc1, fc2;                // 4 dim -> 4 dim -> out_dim
  };
  std::vector<Deepstack> deepstack;  // one per cfg.deepstack_layers entry, in that order
  std::vector<float> post_ln_w, post_ln_b;
  QwenLinear mm0, mm2;
};

// Whether a tower and a decoder are a pair: an M-RoPE decoder (qwen2vl for the Qwen2-VL and
// Qwen2.5-VL towers, qwen3vl(moe) for Qwen3-VL's), rows of the decoder's width, and as many
// deepstack slices as the decoder reads. `tower` names the mmproj in the message.
Status check_qwen_pair(const QwenVisionConfig& tower, const ModelConfig& decoder,
                       const std::string& name);

struct QwenVisionModel {
  QwenVisionConfig cfg;
  QwenVisionWeights w;
  std::string source;
  std::array<uint64_t, 2> fingerprint{};  // XXH3-128 of the config and every weight
  // The mapped file the matrices of a loaded tower point into (shared by copies); null for a
  // tower built in memory, whose matrices own their bytes.
  std::shared_ptr<const void> mapping;

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
