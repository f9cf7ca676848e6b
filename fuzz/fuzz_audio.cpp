// libFuzzer target for the audio decoders (media/audio_decode.h: libsndfile's WAV, FLAC and MP3
// readers, which parse a client's input_audio bytes): decode arbitrary bytes as the format they
// sniff as, and as a declared format the first byte picks (the refusal of a container other than
// declared), under small limits; when they decode, check the clip and resample it to 16 kHz as
// the server does. Any crash, sanitizer report or leak is a bug, and so is a clip over the
// limits, a sample that is not finite, or an error that does not name the input.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "media/audio_decode.h"
#include "media/audio_resample.h"

namespace {

void check(std::span<const uint8_t> bytes, kamera::AudioFormat format) {
  kamera::AudioLimits limits;
  limits.max_bytes = 1 << 20;
  limits.max_seconds = 2.0;  // keeps each input fast; the checks are the same at any limit
  auto a = kamera::decode_audio(bytes, format, "fuzz.audio", limits);
  if (!a.ok()) {
    if (a.message().rfind("fuzz.audio: ", 0) != 0) __builtin_trap();
    return;
  }
  if (a->sample_rate < 1000 || a->sample_rate > 384000 || a->seconds() > limits.max_seconds + 1e-9)
    __builtin_trap();
  for (float v : a->samples)
    if (!std::isfinite(v)) __builtin_trap();
  if (a->samples.empty()) return;
  auto r = kamera::resample_audio(a->samples, a->sample_rate, 16000);
  if (!r.ok()) return;  // a refusal of the resampler is an answer, not a bug
  const double want = double(a->samples.size()) * 16000.0 / a->sample_rate;
  if (std::fabs(double(r->size()) - want) > 2.0) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  if (const auto sniffed = kamera::sniff_audio_format(bytes)) check(bytes, *sniffed);
  if (size > 0) {
    constexpr kamera::AudioFormat kAll[] = {kamera::AudioFormat::Wav, kamera::AudioFormat::Flac,
                                            kamera::AudioFormat::Mp3};
    check(bytes, kAll[data[0] % 3]);
  }
  return 0;
}
