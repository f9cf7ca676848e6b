// An audio clip as the entry points outside the server take it (`kamera generate/logits/chat
// --audio`, the C API's kamera_chunk_from_audio, Python's Chunk.from_audio): a file's bytes whose
// container is told apart by its first bytes (WAV, FLAC or MP3: media/audio_decode.h's
// sniff_audio_format), decoded by decode_audio under its limits and brought to a tower's rate
// (media/audio_resample.h), as the server decodes an input_audio part (whose format the client
// declares instead).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "media/audio_decode.h"

namespace kamera {

struct AudioClip {
  AudioFormat format = AudioFormat::Wav;  // the container the bytes held
  int source_rate = 0;                    // the file's sample rate
  double seconds = 0;                     // the clip's duration
  std::vector<float> samples;             // mono, at the rate asked for
};

// "wav", "flac", "mp3".
std::string audio_format_lower(AudioFormat f);

// The clip in `bytes` at `rate` Hz. `name` (a path, "audio bytes") starts every error message.
// Errors: Unsupported (not a WAV, FLAC or MP3 file; a format libsndfile does not decode), the
// errors of decode_audio (InvalidArgument over a limit, CorruptData when malformed or truncated)
// and of resample_audio.
Result<AudioClip> read_audio(std::span<const uint8_t> bytes, std::string_view name, int rate,
                             const AudioLimits& limits = {});

// The same from a file. Errors as read_audio, and NotFound / InvalidArgument (not a regular file,
// over the byte limit before it is read) / Io.
Result<AudioClip> load_audio(const std::string& path, int rate, const AudioLimits& limits = {});

}  // namespace kamera
