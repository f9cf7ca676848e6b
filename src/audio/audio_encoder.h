// The forward of Qwen2.5-Omni's audio tower (audio/qwen_audio.h) on a clip's log-mel windows.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "audio/qwen_audio.h"
#include "media/log_mel.h"

namespace kamera {

class ThreadPool;

// Holds its scratch between calls. Not thread-safe.
class QwenAudioEncoder {
 public:
  // pool may be null (one thread for kamera's own kernels; OpenBLAS keeps its threads).
  QwenAudioEncoder(const QwenAudioModel& m, ThreadPool* pool) : m_(m), pool_(pool) {}

  // The projected rows of every window, in order: rows(n_frames) x out_dim per window. stop (may
  // be empty) is asked before each layer; true ends the encode (InvalidArgument). Errors: a window
  // of another mel count, or longer than the position table allows.
  Result<std::vector<float>> encode(std::span<const LogMel> windows,
                                    const std::function<bool()>& stop);

  // The rows of one window before pooling, post-LN and projection (the transformer's output;
  // tests compare stages).
  Result<std::vector<float>> transformer(const LogMel& mel, const std::function<bool()>& stop);

 private:
  Result<std::vector<float>> window(const LogMel& mel, const std::function<bool()>& stop);

  const QwenAudioModel& m_;
  ThreadPool* pool_;
  AudioLayers layers_;
  std::vector<float> cols_, y1_, x_;
};

}  // namespace kamera
