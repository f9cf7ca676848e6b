// The forward of Qwen3-Omni / Qwen3-ASR's audio tower (audio/qwen3_audio.h) on a clip's log-mel
// windows, and the windows as llama.cpp's mtmd cuts them (mtmd_audio_preprocessor_qwen3a).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "audio/qwen3_audio.h"
#include "media/log_mel.h"

namespace kamera {

class ThreadPool;

// The clip's windows: centered_log_mel's n / 160 + 1 frames (16 kHz samples) cut every 800
// frames, the last window shorter, each zero-padded (after the log-mel's scaling) to whole
// chunks of 100 frames.
std::vector<LogMel> qwen3_audio_windows(std::span<const float> samples, int n_mels);

// Rows a clip of n_samples at 16 kHz makes: 13 per 100-frame chunk of each window (104 for a
// whole window of 8 s).
int64_t qwen3_audio_rows(int64_t n_samples);

// Holds its scratch between calls. Not thread-safe.
class Qwen3AudioEncoder {
 public:
  // pool may be null (one thread for kamera's own kernels; OpenBLAS keeps its threads).
  Qwen3AudioEncoder(const Qwen3AudioModel& m, ThreadPool* pool) : m_(m), pool_(pool) {}

  // The projected rows of every window, in order: 13 per chunk x out_dim. stop (may be empty) is
  // asked before each layer; true ends the encode (InvalidArgument). Errors: a window of another
  // mel count, of no whole chunk, or of more chunks than the tower attends over at once.
  Result<std::vector<float>> encode(std::span<const LogMel> windows,
                                    const std::function<bool()>& stop);

 private:
  Result<std::vector<float>> window(const LogMel& mel, const std::function<bool()>& stop);
  // The 13 rows (dim each, position embeddings added) of the chunk of frames f0 .. f0 + 99.
  void chunk(const LogMel& mel, int f0, float* out);

  const Qwen3AudioModel& m_;
  ThreadPool* pool_;
  AudioLayers layers_;
  std::vector<float> cols_, a_, b_, x_;
};

}  // namespace kamera
