// The pre-LN Whisper encoder layers the Qwen audio towers share (Qwen2.5-Omni's and Qwen2-Audio's:
// audio/qwen_audio.h; Qwen3-Omni's and Qwen3-ASR's: audio/qwen3_audio.h), as llama.cpp's
// clip_graph::build_vit runs them with LayerNorm and GELU (erf):
//
//   x += W_o Attn(W_q n + b, W_k n (+ b), W_v n + b) + b_o,   n = LN1(x)
//   x += W_fc2 gelu_erf(W_fc1 LN2(x) + b) + b
//
// attending bidirectionally over all n positions, scale 1/sqrt(head_dim).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"
#include "media/log_mel.h"
#include "vision/siglip.h"  // QwenLinear, ClipTensor

namespace kamera {

class ThreadPool;

struct AudioLayer {
  std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;
  QwenLinear q, k, v, o, fc1, fc2;  // k's bias empty where the file has none
};

struct AudioLayerDims {
  int dim = 0, n_heads = 1, ffn_dim = 0;
  float eps = 1e-5f;
};

// The sizes every Qwen audio tower's file gives in its clip.audio.* keys.
struct AudioTowerDims {
  int n_mels = 128;
  int dim = 1280;
  int n_layers = 32;
  int n_heads = 20;
  int ffn_dim = 5120;
  int out_dim = 3584;  // the decoder's width
  int n_pos = 1500;    // rows of the position table
  float eps = 1e-5f;

  int head_dim() const { return dim / n_heads; }
  AudioLayerDims layer_dims() const { return {dim, n_heads, ffn_dim, eps}; }
};

// clip.audio.{num_mel_bins, embedding_length, block_count, attention.head_count,
// feed_forward_length, projection_dim, attention.layer_norm_epsilon} and the rows of
// a.position_embd.weight into d, checked (width a multiple of the heads, a position table, a
// positive epsilon; family names the tower in the errors).
Status read_audio_tower_dims(const GgufFile& g, const std::string& path, const char* family,
                             AudioTowerDims* d);

// The audio projector type of an mmproj GGUF: clip.audio.projector_type, else
// clip.projector_type. Errors: not an mmproj (general.architecture is not "clip"), a file
// without an audio encoder (Unsupported).
Result<std::string> audio_projector_type(const GgufFile& g, const std::string& path);
// The same for a file by its path, "" where it has no audio encoder (errors: unreadable, not an
// mmproj).
Result<std::string> mmproj_audio_projector_type(const std::string& path);

// Loads an audio tower of type M from the mmproj at `path`: read_config(g, path, &m.cfg), every
// tensor of specs(m.cfg, m.w) (the file's other a. and mm.a. tensors refused), the mapping kept,
// then fingerprint(m).
template <class M, class ReadConfig, class Specs, class Fingerprint>
Result<M> load_audio_tower(const std::string& path, const char* family, ReadConfig read_config,
                           Specs specs, Fingerprint fingerprint) {
  KAMERA_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  M m;
  m.source = path;
  KAMERA_TRY(read_config(*file, path, &m.cfg));
  const std::string_view own[] = {"a.", "mm.a."};
  KAMERA_TRY(load_clip_tensors(*file, path, specs(m.cfg, m.w), family, own));
  m.mapping = file->mapping();
  fingerprint(m);
  return m;
}

// The rows of every window, in order (window(mel): one window's rows).
template <class Window>
Result<std::vector<float>> encode_windows(std::span<const LogMel> windows, Window window) {
  std::vector<float> out;
  for (const LogMel& mel : windows) {
    KAMERA_ASSIGN_OR_RETURN(const std::vector<float> rows, window(mel));
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

// Appends layer i's tensors (a.blk.i.*: ln1, attn_q / attn_k / attn_v / attn_out, ln2, ffn_up,
// ffn_down) to `out`, pointing into L; attn_k.bias only with k_bias.
void audio_layer_tensors(std::vector<ClipTensor>& out, AudioLayer& L, int i,
                         const AudioLayerDims& d, bool k_bias);

// Runs layers over n positions of dim values held in x (updated in place), keeping its scratch
// between calls. Not thread-safe.
class AudioLayers {
 public:
  // stop (may be empty) is asked before each layer; true ends the run (InvalidArgument naming
  // `who`).
  Status run(std::span<const AudioLayer> layers, const AudioLayerDims& d, std::vector<float>& x,
             int n, const std::string& who, const std::function<bool()>& stop, ThreadPool* pool);

 private:
  void block(const AudioLayer& L, const AudioLayerDims& d, float* x, int n, ThreadPool* pool);
  std::vector<float> nrm_, q_, k_, v_, att_, h1_, attn_scratch_;
  std::vector<int32_t> members_, offsets_;
};

}  // namespace kamera
