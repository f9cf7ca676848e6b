// Audio clips as position-free chunks (Qwen2.5-Omni): one clip per chunk, its tower rows
// (audio/audio_encoder.h: 750 a 30-s window) on positions 0..n-1 in t, h and w alike, as
// Hugging Face's Qwen2_5OmniThinker get_rope_index gives a clip's rows (arange(audio_len) in all
// three sections; one position per 40 ms of audio, the model's 25 time positions a second) and
// llama.cpp's mtmd decodes them (set_position_mrope_1d). So a clip relocates, is patched and
// windowed like a text chunk. The prompt writes <|audio_bos|> before and <|audio_eos|> after the
// rows, as Qwen2.5-Omni's chat template and llama.cpp's mtmd place them.
//
// A clip's key is XXH3-128 of its 16 kHz samples and both models' fingerprints; the key names the
// placed chunk, kept in an LRU and, with a store (set_store), looked up in and written through
// to the store's image entries (vision/picture_lru.h: the same entries as pictures).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "audio/audio_encoder.h"
#include "model/model.h"
#include "reuse/chunk.h"
#include "vision/picture_lru.h"
#include "vision/vl_prompt.h"

namespace kamera {

class ChunkStore;
class ThreadPool;

inline constexpr std::string_view kAudioBos = "<|audio_bos|>";
inline constexpr std::string_view kAudioEos = "<|audio_eos|>";
inline constexpr int kAudioSampleRate = 16000;

// <|audio_bos|> / <|audio_eos|> in `tok`'s vocabulary (empty if either is missing).
VisionDelimiters audio_delimiters(const Tokenizer* tok);

// Whether the tower's rows go into `decoder`: a qwen2vl (M-RoPE) decoder of the tower's projected
// width whose vocabulary has the two delimiters.
Status check_qwen_audio_pair(const QwenAudioConfig& tower, const Model& decoder,
                             const std::string& mmproj);

// Rows a clip of n_samples at 16 kHz takes in the prompt: 750 per 30-s window (media/log_mel.h
// cuts the clip and 30 s of silence into whole windows).
int64_t qwen_audio_rows(int64_t n_samples);

// The encoded, placed chunks of clips by key. Not thread-safe.
class QwenAudioChunks {
 public:
  QwenAudioChunks(const QwenAudioModel& tower, const std::array<uint64_t, 2>& decoder_fp,
                  ThreadPool* pool, size_t max_entries = 64);

  void set_store(ChunkStore* store) { lru_.set_store(store); }
  void set_stop(std::function<bool()> stop) { stop_ = std::move(stop); }

  // One clip of 16 kHz mono samples. encoded (optional): whether this call ran the tower.
  Result<std::shared_ptr<const ChunkContent>> clip(std::span<const float> samples,
                                                   bool* encoded = nullptr);

  using Stats = PictureLru::Stats;
  const Stats& stats() const { return lru_.stats(); }

 private:
  const QwenAudioModel& tower_;
  std::array<uint64_t, 2> decoder_fp_;
  QwenAudioEncoder enc_;
  PictureLru lru_;
  std::function<bool()> stop_;
};

}  // namespace kamera
