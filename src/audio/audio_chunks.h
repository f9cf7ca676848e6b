// Audio clips as position-free chunks (Qwen2.5-Omni, Qwen2-Audio, Qwen3-Omni, Qwen3-ASR): one clip
// per chunk, its tower rows (Qwen2.5-Omni: audio/audio_encoder.h, 750 a 30-s window; Qwen3:
// audio/qwen3_audio_encoder.h, 13 per 100 mel frames) on positions 0..n-1 in t, h and w alike,
// as Hugging Face's thinkers' get_rope_index give a clip's rows (arange(audio_len) in all three
// sections) and llama.cpp's mtmd decodes them (set_position_mrope_1d). So a clip relocates, is
// patched and windowed like a text chunk. The prompt writes the model's delimiters around the
// rows, as its chat template and llama.cpp's mtmd place them: <|audio_bos|> / <|audio_eos|>
// (Qwen2.5-Omni), <|audio_start|> / <|audio_end|> (Qwen3). A Qwen3 clip of more than 8 s is
// several windows in mtmd (one audio chunk each, back to back between the delimiters); here its
// rows are one chunk, on the same positions.
//
// A clip's key is XXH3-128 of a tag naming the tower family, its 16 kHz samples and both models'
// fingerprints; the key names the placed chunk, kept in an LRU and, with a store (set_store),
// looked up in and written through to the store's image entries (vision/picture_lru.h: the same
// entries as pictures).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "audio/audio_encoder.h"
#include "audio/qwen3_audio_encoder.h"
#include "model/model.h"
#include "reuse/chunk.h"
#include "vision/picture_lru.h"
#include "vision/vl_prompt.h"

namespace kamera {

class ChunkStore;
class ThreadPool;

inline constexpr std::string_view kAudioBos = "<|audio_bos|>";
inline constexpr std::string_view kAudioEos = "<|audio_eos|>";
inline constexpr std::string_view kAudioStart = "<|audio_start|>";
inline constexpr std::string_view kAudioEnd = "<|audio_end|>";
inline constexpr int kAudioSampleRate = 16000;

// <|audio_bos|> / <|audio_eos|> in `tok`'s vocabulary (empty if either is missing).
VisionDelimiters audio_delimiters(const Tokenizer* tok);
// <|audio_start|> / <|audio_end|> in `tok`'s vocabulary (empty if either is missing).
VisionDelimiters qwen3_audio_delimiters(const Tokenizer* tok);

// Whether the tower's rows go into `decoder`: a qwen2vl (M-RoPE) decoder of the tower's projected
// width whose vocabulary has the two delimiters.
Status check_qwen_audio_pair(const QwenAudioConfig& tower, const Model& decoder,
                             const std::string& mmproj);
// The same for a Qwen3 tower: a qwen3vl or qwen3vlmoe decoder (Qwen3-ASR's, Qwen3-Omni's
// thinker) whose embedding rows are the tower's projected width (llama.cpp's n_embd_inp: no
// deepstack slices) and whose vocabulary has <|audio_start|> / <|audio_end|>.
Status check_qwen3_audio_pair(const Qwen3AudioConfig& tower, const Model& decoder,
                              const std::string& mmproj);

// Rows a clip of n_samples at 16 kHz takes in the prompt: 750 per 30-s window (media/log_mel.h
// cuts the clip and 30 s of silence into whole windows).
int64_t qwen_audio_rows(int64_t n_samples);

// The encoded, placed chunks of clips by key, encoding a clip's samples with `encode`. Not
// thread-safe.
class AudioClipCache {
 public:
  using Encode = std::function<Result<std::vector<float>>(std::span<const float> samples,
                                                          const std::function<bool()>& stop)>;
  AudioClipCache(const char* tag, const std::array<uint64_t, 2>& tower_fp, int out_dim,
                 const std::array<uint64_t, 2>& decoder_fp, Encode encode, size_t max_entries);
  AudioClipCache(const AudioClipCache&) = delete;
  AudioClipCache& operator=(const AudioClipCache&) = delete;

  void set_store(ChunkStore* store) { lru_.set_store(store); }
  void set_stop(std::function<bool()> stop) { stop_ = std::move(stop); }

  // One clip of 16 kHz mono samples. encoded (optional): whether this call ran the tower.
  Result<std::shared_ptr<const ChunkContent>> clip(std::span<const float> samples,
                                                   bool* encoded = nullptr);

  using Stats = PictureLru::Stats;
  const Stats& stats() const { return lru_.stats(); }

 private:
  const char* tag_;
  std::array<uint64_t, 2> tower_fp_, decoder_fp_;
  int out_dim_;
  Encode encode_;
  PictureLru lru_;
  std::function<bool()> stop_;
};

// Qwen2.5-Omni's / Qwen2-Audio's clips: Whisper's 30-s windows through QwenAudioEncoder.
class QwenAudioChunks : public AudioClipCache {
 public:
  QwenAudioChunks(const QwenAudioModel& tower, const std::array<uint64_t, 2>& decoder_fp,
                  ThreadPool* pool, size_t max_entries = 64);

 private:
  QwenAudioEncoder enc_;
};

// Qwen3-Omni's / Qwen3-ASR's clips: qwen3_audio_windows through Qwen3AudioEncoder.
class Qwen3AudioChunks : public AudioClipCache {
 public:
  Qwen3AudioChunks(const Qwen3AudioModel& tower, const std::array<uint64_t, 2>& decoder_fp,
                   ThreadPool* pool, size_t max_entries = 64);

 private:
  Qwen3AudioEncoder enc_;
};

}  // namespace kamera
