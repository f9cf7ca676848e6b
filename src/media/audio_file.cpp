#include "media/audio_file.h"

#include "media/audio_resample.h"
#include "media/media_file.h"

namespace kamera {

std::string audio_format_lower(AudioFormat f) {
  switch (f) {
    case AudioFormat::Wav:
      return "wav";
    case AudioFormat::Flac:
      return "flac";
    case AudioFormat::Mp3:
      return "mp3";
  }
  return "audio";
}

Result<AudioClip> read_audio(std::span<const uint8_t> bytes, std::string_view name, int rate,
                             const AudioLimits& limits) {
  const auto format = sniff_audio_format(bytes);
  if (!format) return make_error(ErrorCode::Unsupported, "{}: not a WAV, FLAC or MP3 file", name);
  KAMERA_ASSIGN_OR_RETURN(Audio a, decode_audio(bytes, *format, name, limits));
  AudioClip c;
  c.format = *format;
  c.source_rate = a.sample_rate;
  c.seconds = a.seconds();
  if (a.sample_rate == rate) {
    c.samples = std::move(a.samples);
  } else {
    auto r = resample_audio(a.samples, a.sample_rate, rate);
    if (!r.ok()) return with_context(r.error(), std::string(name));
    c.samples = std::move(*r);
  }
  return c;
}

Result<AudioClip> load_audio(const std::string& path, int rate, const AudioLimits& limits) {
  KAMERA_ASSIGN_OR_RETURN(const auto bytes, read_media_file(path, limits.max_bytes, "audio"));
  return read_audio(bytes, path, rate, limits);
}

}  // namespace kamera
