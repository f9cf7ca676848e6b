// Qwen3-Omni's and Qwen3-ASR's audio tower, as llama.cpp's converter writes it into the mmproj
// GGUF (conversion/qwen3vl.py: Qwen3OmniMmprojModel / Qwen3ASRMmprojModel over Qwen25AudioModel;
// clip.audio.projector_type "qwen3a", no clip.projector_type in Qwen3-ASR's audio-only file) and
// as llama.cpp's clip runs it (tools/mtmd/models/qwen3a.cpp with clip_graph::build_vit):
//
//   input    one window of at most 800 log-mel frames (media/log_mel.h centered_log_mel),
//            zero-padded to whole chunks of 100 frames (audio/qwen3_audio_encoder.h)
//   per chunk, as an image of n_mels x 100 with one channel:
//   conv     3 x [Conv2d(k 3, stride 2, pad 1) + bias, GELU (erf)]: 128 x 100 -> 64 x 50 ->
//            32 x 25 -> 16 x 13 (mel x time), conv_ch channels
//   conv_out each of the 13 time steps' (channel, mel) values, channel-major (c * 16 + f), times
//            W_out (no bias): 13 rows of dim
//   embed    x += pos[t], t = 0..12 in every chunk (the converter's sinusoid table)
//   then over the window's 13 x n_chunks rows together:
//   layers   audio/audio_layers.h (pre-LN, q / k / v / out with biases), eps from the file
//   final    LN (ln_post), then proj2(gelu_erf(proj1 x + b)) + b into the decoder's width
//
// Keys: clip.has_audio_encoder, clip.audio.projector_type (or clip.projector_type) "qwen3a",
// clip.audio.{num_mel_bins, embedding_length, feed_forward_length, block_count,
// attention.head_count, attention.layer_norm_epsilon, projection_dim}.
// Tensors (GGUF names; ne[0] first):
//   a.conv2d.1.weight [3, 3, 1, C] (f16 as converted), a.conv2d.N.weight [3, 3, C, C] (N = 2, 3),
//   a.conv2d.N.bias [1, 1, C]; a.conv_out.weight [C * F, dim] (f16), F the mel bins left
//   after three convolutions (16 of 128)
//   a.position_embd.weight [dim, n_pos]
//   a.blk.N.ln1.{weight,bias}, ln2.{weight,bias} [dim]       self_attn_layer_norm, final_layer_norm
//   a.blk.N.attn_{q,k,v,out}.{weight,bias} [dim, dim]       (attn_k.bias read where present)
//   a.blk.N.ffn_up.{weight,bias} [dim, ffn]; ffn_down.{weight,bias} [ffn, dim]   fc1, fc2
//   a.post_ln.{weight,bias} [dim]                            ln_post
//   mm.a.mlp.1.{weight,bias} [dim, dim]; mm.a.mlp.2.{weight,bias} [dim, out]   proj1, proj2
//
// Where llama.cpp departs from Hugging Face's encoder (docs/VISION.md, "Qwen3-Omni / Qwen3-ASR"):
// it keeps all 13 rows of a clip's last, zero-padded chunk (HF keeps the rows of the frames the
// clip has, and attends over those alone); kamera follows llama.cpp, whose files it reads.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "audio/audio_layers.h"
#include "core/status.h"

namespace kamera {

struct Qwen3AudioConfig : AudioTowerDims {
  static constexpr int kChunkFrames = 100;   // n_window * 2: frames a chunk's convolutions see
  static constexpr int kWindowFrames = 800;  // n_window_infer: frames attending to each other
  std::string projector = "qwen3a";
  int conv_ch = 480;   // downsample_hidden_size
  bool k_bias = true;  // the file has a.blk.N.attn_k.bias

  // One stride-2, pad-1, k-3 convolution's output length; three of them.
  static int halve(int n) { return (n - 1) / 2 + 1; }
  static int thrice(int n) { return halve(halve(halve(n))); }
  static int chunk_rows() { return thrice(kChunkFrames); }  // 13
  int conv_out_in() const { return conv_ch * thrice(n_mels); }
};

struct Qwen3AudioWeights {
  QwenLinear conv1, conv2, conv3;  // conv_ch x (in * 9), columns (channel, mel tap, time tap)
  QwenLinear conv_out;             // dim x conv_out_in(), no bias
  std::vector<float> pos;          // n_pos x dim
  std::vector<AudioLayer> layers;
  std::vector<float> post_ln_w, post_ln_b;
  QwenLinear mlp1, mlp2;
};

struct Qwen3AudioModel {
  Qwen3AudioConfig cfg;
  Qwen3AudioWeights w;
  std::string source;
  std::array<uint64_t, 2> fingerprint{};  // XXH3-128 of the config and every weight
  std::shared_ptr<const void> mapping;    // the mapped file the matrices point into

  // Loads the audio tower of an mmproj GGUF of audio projector type "qwen3a" (Qwen3-ASR's file,
  // or Qwen3-Omni's audio half, the vision half beside it left unread). Errors: a file without
  // an audio encoder, another projector (Unsupported, naming it), a tensor missing, misshapen
  // or unknown.
  static Result<Qwen3AudioModel> load(const std::string& path);
};

// Whether an mmproj of this audio projector type holds a tower Qwen3AudioModel loads.
bool is_qwen3_audio_projector(const std::string& type);

}  // namespace kamera
