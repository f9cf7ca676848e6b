// Qwen2.5-Omni's audio tower (a Whisper encoder with average pooling and a projection), as
// llama.cpp's converter writes it into the mmproj GGUF (conversion/qwenvl.py, Qwen25AudioModel:
// clip.projector_type "qwen2.5o", the audio half beside the vision half; Qwen2-Audio's
// audio-only files say "qwen2a" and hold the same layout), and as llama.cpp's clip runs it
// (tools/mtmd/models/whisper-enc.cpp with clip_graph::build_vit):
//
//   input    one window of log-mel frames (media/log_mel.h): n_mels x 3000
//   conv1    Conv1d(n_mels -> dim, k 3, pad 1) + bias, GELU (erf)
//   conv2    Conv1d(dim -> dim, k 3, stride 2, pad 1) + bias, GELU (erf): 1500 positions
//   embed    x += pos[i], the converter's sinusoid table (sin half, then cos half; 1500 rows)
//   block    x += W_o Attn(W_q n + b, W_k n, W_v n + b) + b_o,   n = LN1(x)   (k has no bias)
//            x += W_fc2 gelu_erf(W_fc1 LN2(x) + b) + b                  (pre-LN, eps from file)
//   attend   bidirectional over the window's positions, scale 1/sqrt(head_dim)
//   pool     AvgPool1d(2, stride 2) over positions: 750 rows
//   final    LN(x) (ln_post), then the projection W x + b (proj) into the decoder's width
//
// Keys: clip.has_audio_encoder, clip.audio.{num_mel_bins, embedding_length, feed_forward_length,
// block_count, attention.head_count, attention.layer_norm_epsilon, projection_dim}.
// Tensors (GGUF names; ne[0] first):
//   a.conv1d.1.weight [3, n_mels, dim] (f16 as converted), a.conv1d.1.bias [1, dim]
//   a.conv1d.2.weight [3, dim, dim],                       a.conv1d.2.bias [1, dim]
//   a.position_embd.weight [dim, n_pos]
//   a.blk.N.ln1.{weight,bias}, ln2.{weight,bias} [dim]    self_attn_layer_norm, final_layer_norm
//   a.blk.N.attn_{q,v,out}.{weight,bias}, attn_k.weight [dim, dim]
//   a.blk.N.ffn_up.{weight,bias} [dim, ffn]; ffn_down.{weight,bias} [ffn, dim]   fc1, fc2
//   a.post_ln.{weight,bias} [dim]; mm.a.fc.{weight,bias} [dim, out]               ln_post, proj
//
// Where Hugging Face's Qwen2_5OmniAudioEncoder differs (docs/VISION.md, "Audio"): it runs the
// convolutions and attention on windows of n_window * 2 = 200 mel frames (100 positions), each
// with its positions from 0, and reads only the clip's own frames (no 30-s padding); llama.cpp
// and kamera attend over the whole 30-s window. kamera follows llama.cpp, whose files it reads.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "audio/audio_layers.h"
#include "core/status.h"
#include "vision/siglip.h"  // QwenLinear, ClipTensor

namespace kamera {

// n_pos: positions after conv2 a window may have.
struct QwenAudioConfig : AudioTowerDims {
  std::string projector = "qwen2.5o";  // or "qwen2a"

  // Positions after conv2 and rows after pooling, for a window of `frames` mel frames.
  static int positions(int frames) { return (frames - 1) / 2 + 1; }
  static int rows(int frames) { return positions(frames) / 2; }
};

struct QwenAudioWeights {
  QwenLinear conv1, conv2;   // dim x (in * 3), columns (channel, tap), as the file's weight
  std::vector<float> pos;    // n_pos x dim
  using Layer = AudioLayer;  // k without bias
  std::vector<Layer> layers;
  std::vector<float> post_ln_w, post_ln_b;
  QwenLinear proj;
};

struct QwenAudioModel {
  QwenAudioConfig cfg;
  QwenAudioWeights w;
  std::string source;
  std::array<uint64_t, 2> fingerprint{};  // XXH3-128 of the config and every weight
  std::shared_ptr<const void> mapping;    // the mapped file the matrices point into

  // Loads the audio half of an mmproj GGUF of projector type "qwen2.5o" (Qwen2.5-Omni, the
  // vision half beside it left unread) or "qwen2a" (Qwen2-Audio). Errors: a file without an
  // audio encoder, another projector (Unsupported, naming it), a tensor missing or misshapen.
  static Result<QwenAudioModel> load(const std::string& path);
};

// Whether an mmproj of this projector type holds an audio tower kamera loads.
bool is_qwen_audio_projector(const std::string& type);

}  // namespace kamera
