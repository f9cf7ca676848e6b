// Audio decoding through libsndfile, from memory: WAV of every sample format libsndfile reads
// (8-bit unsigned, 16/24/32-bit integer, 32/64-bit float, A-law, mu-law, ADPCM), FLAC and MPEG
// layer III (MP3, through libmpg123), to f32 mono samples in [-1, 1] at the file's rate.
// Integer samples are scaled as miniaudio, librosa and soundfile scale them (a 16-bit s / 32768, an
// 8-bit (u - 128) / 128); several channels are mixed to mono by their mean. media/audio_resample.h
// brings the rate to a tower's.
//
// The declared format must name the container the bytes hold (sniffed from their first bytes
// before libsndfile sees them): a "wav" part holding FLAC is refused by name, and libsndfile's
// other formats (AIFF, OGG, ...) are never opened.
//
// Bounded cost: the encoded size is checked against AudioLimits before anything is read; the
// header's channels (1 to 8) and rate (1 kHz to 384 kHz) before any sample; the duration the
// header declares against max_seconds before the sample buffer is allocated, and the frames read
// against it again while reading (a header that understates its length is cut off and refused).
// A truncated file is an error, never a clip cut short: a WAV whose data chunk declares more
// bytes than are present, a FLAC or MP3 that yields fewer frames than its header declares.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kamera {

struct AudioLimits {
  int64_t max_bytes = int64_t(64) << 20;  // encoded file size
  double max_seconds = 600.0;             // duration
};

struct Audio {
  int sample_rate = 0;
  std::vector<float> samples;  // mono

  double seconds() const { return sample_rate > 0 ? double(samples.size()) / sample_rate : 0.0; }
};

enum class AudioFormat { Wav, Flac, Mp3 };

// "wav", "flac", "mp3" (OpenAI's names, lower case); nullopt for any other.
std::optional<AudioFormat> audio_format_named(std::string_view name);
const char* audio_format_name(AudioFormat f);
// The names audio_format_named takes: "wav, mp3, flac".
const char* audio_format_names();

// The container the bytes start like: RIFF/WAVE, "fLaC", an ID3v2 tag or an MPEG layer III frame
// header; nullopt for anything else.
std::optional<AudioFormat> sniff_audio_format(std::span<const uint8_t> bytes);

// Whether the bytes start like a RIFF/WAVE file ("RIFF" .... "WAVE").
bool is_wav(std::span<const uint8_t> bytes);

// Decodes an audio file's bytes that the caller declared as `format`. `name` ("audio", a path)
// starts every error message. Errors: InvalidArgument (over a limit), Unsupported (the bytes are
// another container than declared, or a well-formed file libsndfile does not decode: its message
// names the format), CorruptData (malformed or truncated).
Result<Audio> decode_audio(std::span<const uint8_t> bytes, AudioFormat format,
                           std::string_view name, const AudioLimits& limits = {});

// decode_audio of a declared WAV.
inline Result<Audio> decode_wav(std::span<const uint8_t> bytes, std::string_view name,
                                const AudioLimits& limits = {}) {
  return decode_audio(bytes, AudioFormat::Wav, name, limits);
}

}  // namespace kamera
