// Audio clips as chunks (audio/audio_chunks.h).
#include "audio/audio_chunks.h"

#include <xxhash.h>

#include <cstring>

#include "media/log_mel.h"

namespace kamera {

namespace {

// XXH3-128 of the tag (and its NUL), both fingerprints, the sample count and the samples.
ChunkId clip_key(const char* tag, std::span<const float> s, const std::array<uint64_t, 2>& tower_fp,
                 const std::array<uint64_t, 2>& dec_fp) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  XXH3_128bits_update(st, tag, std::strlen(tag) + 1);
  XXH3_128bits_update(st, tower_fp.data(), sizeof(uint64_t) * 2);
  XXH3_128bits_update(st, dec_fp.data(), sizeof(uint64_t) * 2);
  const uint64_t n = s.size();
  XXH3_128bits_update(st, &n, sizeof(n));
  if (n) XXH3_128bits_update(st, s.data(), s.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return {h.high64, h.low64};
}

VisionDelimiters delimiters_of(const Tokenizer* tok, std::string_view open,
                               std::string_view close) {
  if (!tok) return {};
  const int32_t o = find_piece(*tok, open), c = find_piece(*tok, close);
  if (o < 0 || c < 0) return {};
  VisionDelimiters d;
  d.open_text = std::string(open);
  d.close_text = std::string(close);
  d.open.push_back(o);
  d.close.push_back(c);
  return d;
}

const Tokenizer* tokenizer_of(const Model& m) {
  return m.tokenizer ? &*m.tokenizer : nullptr;
}

}  // namespace

VisionDelimiters audio_delimiters(const Tokenizer* tok) {
  return delimiters_of(tok, kAudioBos, kAudioEos);
}

VisionDelimiters qwen3_audio_delimiters(const Tokenizer* tok) {
  return delimiters_of(tok, kAudioStart, kAudioEnd);
}

Status check_qwen_audio_pair(const QwenAudioConfig& tower, const Model& decoder,
                             const std::string& mmproj) {
  if (decoder.cfg.arch != Arch::Qwen2Vl)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: a Qwen2.5-Omni audio tower needs a qwen2vl decoder (the thinker); "
                      "this one is '{}'",
                      mmproj, arch_name(decoder.cfg.arch));
  if (tower.out_dim != decoder.cfg.dim)
    return make_error(ErrorCode::InvalidArgument,
                      "{} projects audio to width {}, but the decoder is {} wide (not a pair)",
                      mmproj, tower.out_dim, decoder.cfg.dim);
  if (audio_delimiters(tokenizer_of(decoder)).empty())
    return make_error(ErrorCode::InvalidArgument,
                      "{}: the decoder {} has no {} / {} tokens in its vocabulary", mmproj,
                      decoder.source, kAudioBos, kAudioEos);
  return Status::Ok();
}

Status check_qwen3_audio_pair(const Qwen3AudioConfig& tower, const Model& decoder,
                              const std::string& mmproj) {
  if (!is_qwen3vl(decoder.cfg.arch))
    return make_error(ErrorCode::InvalidArgument,
                      "{}: a Qwen3-Omni / Qwen3-ASR audio tower needs a qwen3vl or qwen3vlmoe "
                      "decoder (the thinker); this one is '{}'",
                      mmproj, arch_name(decoder.cfg.arch));
  if (tower.out_dim != decoder.cfg.input_width())
    return make_error(ErrorCode::InvalidArgument,
                      "{} projects audio to width {}, but the decoder's embedding rows are {} "
                      "wide (not a pair)",
                      mmproj, tower.out_dim, decoder.cfg.input_width());
  if (qwen3_audio_delimiters(tokenizer_of(decoder)).empty())
    return make_error(ErrorCode::InvalidArgument,
                      "{}: the decoder {} has no {} / {} tokens in its vocabulary", mmproj,
                      decoder.source, kAudioStart, kAudioEnd);
  return Status::Ok();
}

int64_t qwen_audio_rows(int64_t n_samples) {
  const WhisperMelConfig c;
  const int64_t frames = (n_samples + int64_t(c.sample_rate) * 30) / c.hop + 1;
  return std::max<int64_t>(1, frames / c.window_frames) * QwenAudioConfig::rows(c.window_frames);
}

AudioClipCache::AudioClipCache(const char* tag, const std::array<uint64_t, 2>& tower_fp,
                               int out_dim, const std::array<uint64_t, 2>& decoder_fp,
                               Encode encode, size_t max_entries)
    : tag_(tag),
      tower_fp_(tower_fp),
      decoder_fp_(decoder_fp),
      out_dim_(out_dim),
      encode_(std::move(encode)),
      lru_(decoder_fp, max_entries) {}

Result<std::shared_ptr<const ChunkContent>> AudioClipCache::clip(std::span<const float> samples,
                                                                 bool* encoded) {
  return lru_.get(
      clip_key(tag_, samples, tower_fp_, decoder_fp_), out_dim_,
      [&]() -> Result<ChunkContent> {
        ChunkContent c;
        c.dim = out_dim_;
        KAMERA_ASSIGN_OR_RETURN(c.embeddings, encode_(samples, stop_));
        for (int i = 0; i < c.n(); ++i) c.layout.push_back(Pos::linear(i));
        return c;
      },
      encoded);
}

QwenAudioChunks::QwenAudioChunks(const QwenAudioModel& tower,
                                 const std::array<uint64_t, 2>& decoder_fp, ThreadPool* pool,
                                 size_t max_entries)
    : AudioClipCache(
          "kamera-qwen25o-audio-v1", tower.fingerprint, tower.cfg.out_dim, decoder_fp,
          [this](std::span<const float> s, const std::function<bool()>& stop) {
            return enc_.encode(whisper_log_mel(s), stop);
          },
          max_entries),
      enc_(tower, pool) {}

Qwen3AudioChunks::Qwen3AudioChunks(const Qwen3AudioModel& tower,
                                   const std::array<uint64_t, 2>& decoder_fp, ThreadPool* pool,
                                   size_t max_entries)
    : AudioClipCache(
          "kamera-qwen3a-audio-v1", tower.fingerprint, tower.cfg.out_dim, decoder_fp,
          [this, n_mels = tower.cfg.n_mels](std::span<const float> s,
                                            const std::function<bool()>& stop) {
            return enc_.encode(qwen3_audio_windows(s, n_mels), stop);
          },
          max_entries),
      enc_(tower, pool) {}

}  // namespace kamera
