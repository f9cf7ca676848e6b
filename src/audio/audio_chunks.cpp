// Audio clips as chunks (audio/audio_chunks.h).
#include "audio/audio_chunks.h"

#include <xxhash.h>

#include <cstring>

#include "media/log_mel.h"

namespace kamera {

namespace {

// XXH3-128 of the tag (and its NUL), both fingerprints, the sample count and the samples.
ChunkId clip_key(std::span<const float> s, const std::array<uint64_t, 2>& tower_fp,
                 const std::array<uint64_t, 2>& dec_fp) {
  static constexpr char kTag[] = "kamera-qwen25o-audio-v1";
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  XXH3_128bits_update(st, kTag, sizeof(kTag));
  XXH3_128bits_update(st, tower_fp.data(), sizeof(uint64_t) * 2);
  XXH3_128bits_update(st, dec_fp.data(), sizeof(uint64_t) * 2);
  const uint64_t n = s.size();
  XXH3_128bits_update(st, &n, sizeof(n));
  if (n) XXH3_128bits_update(st, s.data(), s.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return {h.high64, h.low64};
}

}  // namespace

VisionDelimiters audio_delimiters(const Tokenizer* tok) {
  if (!tok) return {};
  const int32_t bos = find_piece(*tok, kAudioBos), eos = find_piece(*tok, kAudioEos);
  if (bos < 0 || eos < 0) return {};
  VisionDelimiters d;
  d.open_text = std::string(kAudioBos);
  d.close_text = std::string(kAudioEos);
  d.open.push_back(bos);
  d.close.push_back(eos);
  return d;
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
  if (audio_delimiters(decoder.tokenizer ? &*decoder.tokenizer : nullptr).empty())
    return make_error(ErrorCode::InvalidArgument,
                      "{}: the decoder {} has no {} / {} tokens in its vocabulary", mmproj,
                      decoder.source, kAudioBos, kAudioEos);
  return Status::Ok();
}

int64_t qwen_audio_rows(int64_t n_samples) {
  const WhisperMelConfig c;
  const int64_t frames = (n_samples + int64_t(c.sample_rate) * 30) / c.hop + 1;
  return std::max<int64_t>(1, frames / c.window_frames) * QwenAudioConfig::rows(c.window_frames);
}

QwenAudioChunks::QwenAudioChunks(const QwenAudioModel& tower,
                                 const std::array<uint64_t, 2>& decoder_fp, ThreadPool* pool,
                                 size_t max_entries)
    : tower_(tower), decoder_fp_(decoder_fp), enc_(tower, pool), lru_(decoder_fp, max_entries) {}

Result<std::shared_ptr<const ChunkContent>> QwenAudioChunks::clip(std::span<const float> samples,
                                                                  bool* encoded) {
  return lru_.get(
      clip_key(samples, tower_.fingerprint, decoder_fp_), tower_.cfg.out_dim,
      [&]() -> Result<ChunkContent> {
        ChunkContent c;
        c.dim = tower_.cfg.out_dim;
        KAMERA_ASSIGN_OR_RETURN(c.embeddings, enc_.encode(whisper_log_mel(samples), stop_));
        for (int i = 0; i < c.n(); ++i) c.layout.push_back(Pos::linear(i));
        return c;
      },
      encoded);
}

}  // namespace kamera
