// Sample-rate conversion of mono f32 audio by band-limited (windowed-sinc) interpolation, the
// method of libsamplerate's and torchaudio's sinc resamplers, written here so the media layer
// needs no audio library:
//
//   y[i] = sum_j x[j] h(i * in / out - j),   h(t) = fc sinc(fc t) kaiser(t / (Z / fc))
//
// fc = rolloff * min(1, out / in) is the low-pass cutoff as a fraction of the input's Nyquist
// frequency (downsampling removes what the new rate cannot hold; upsampling only interpolates),
// Z = 16 zero crossings of the sinc on each side, a Kaiser window of beta 8.6 and rolloff 0.95.
// Input samples outside the clip are zero. The ratio out / in is rational (integer rates), so the
// filter's phases repeat every out / gcd(in, out) outputs and are tabulated once per call.
// Equal rates return the samples unchanged. tests/unit/media/test_audio.cpp measures it on sines
// (passband error, stopband attenuation).
#pragma once

#include <span>
#include <vector>

#include "core/status.h"

namespace kamera {

// ceil(n * out_rate / in_rate) samples at out_rate. Errors (InvalidArgument): a rate outside
// [1000, 384000] Hz.
Result<std::vector<float>> resample_audio(std::span<const float> x, int in_rate, int out_rate);

}  // namespace kamera
