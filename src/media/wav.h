// WAV (RIFF/WAVE) decoding: PCM 16-bit little-endian, mono or stereo, to f32 samples in [-1, 1)
// (s / 32768, as miniaudio, librosa and soundfile scale them), stereo mixed to mono by the mean
// of the two channels. The sample rate is the file's; media/audio_resample.h brings it to a
// tower's rate.
//
// Bounded cost: the file size is checked against WavLimits before anything is read, the data
// chunk's declared size against the bytes present (a truncated file is an error, never a clip cut
// short) and the duration against max_seconds before the sample buffer is allocated. Chunks other
// than "fmt " and "data" (LIST, fact, ...) are skipped. Refused by name (Unsupported): another
// sample format (8/24/32-bit, float, A-law, WAVE_FORMAT_EXTENSIBLE of another subtype), more than
// two channels.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kamera {

struct WavLimits {
  int64_t max_bytes = int64_t(64) << 20;  // encoded file size
  double max_seconds = 600.0;             // duration
};

struct Audio {
  int sample_rate = 0;
  std::vector<float> samples;  // mono

  double seconds() const { return sample_rate > 0 ? double(samples.size()) / sample_rate : 0.0; }
};

// Whether the bytes start like a RIFF/WAVE file ("RIFF" .... "WAVE").
bool is_wav(std::span<const uint8_t> bytes);

// Decodes a WAV file's bytes. `name` ("request audio 1", a path) starts every error message.
// Errors: InvalidArgument (not WAV, over a limit), CorruptData (malformed or truncated),
// Unsupported (a well-formed format kamera does not decode).
Result<Audio> decode_wav(std::span<const uint8_t> bytes, std::string_view name,
                         const WavLimits& limits = {});

}  // namespace kamera
