// The windowed-sinc resampler (media/audio_resample.h).
#include "media/audio_resample.h"

#include <cmath>
#include <numbers>
#include <numeric>

namespace kamera {

namespace {

constexpr double kZeros = 16.0;
constexpr double kBeta = 8.6;
constexpr double kRolloff = 0.95;

double sinc(double x) {
  if (std::abs(x) < 1e-12) return 1.0;
  const double px = std::numbers::pi * x;
  return std::sin(px) / px;
}

double kaiser(double u) {  // u in [-1, 1]
  if (std::abs(u) >= 1.0) return 0.0;
  return std::cyl_bessel_i(0.0, kBeta * std::sqrt(1.0 - u * u)) / std::cyl_bessel_i(0.0, kBeta);
}

}  // namespace

Result<std::vector<float>> resample_audio(std::span<const float> x, int in_rate, int out_rate) {
  for (int r : {in_rate, out_rate})
    if (r < 1000 || r > 384000)
      return make_error(ErrorCode::InvalidArgument, "audio resample: rate {} Hz", r);
  if (in_rate == out_rate) return std::vector<float>(x.begin(), x.end());
  const int64_t g = std::gcd(in_rate, out_rate), up = out_rate / g, down = in_rate / g;
  const double fc = kRolloff * std::min(1.0, double(out_rate) / in_rate);
  const int half = int(std::ceil(kZeros / fc));  // taps each side, in input samples
  const int taps = 2 * half + 1;
  // phase p: output i with i * down = q * up + p sits at input q + p / up
  std::vector<float> table(size_t(up) * taps);
  for (int64_t p = 0; p < up; ++p)
    for (int k = 0; k < taps; ++k) {
      const double t = double(p) / double(up) - double(k - half);  // position - tap index
      table[size_t(p) * taps + k] = float(fc * sinc(fc * t) * kaiser(t * fc / kZeros));
    }
  const int64_t n = int64_t(x.size());
  const int64_t n_out = (n * up + down - 1) / down;
  std::vector<float> y(static_cast<size_t>(n_out));
  for (int64_t i = 0; i < n_out; ++i) {
    const int64_t q = i * down / up, p = i * down - q * up;
    const float* h = table.data() + size_t(p) * taps;
    double acc = 0.0;
    const int64_t j0 = q - half;
    const int k0 = int(std::max<int64_t>(0, -j0)), k1 = int(std::min<int64_t>(taps, n - j0));
    for (int k = k0; k < k1; ++k) acc += double(h[k]) * x[size_t(j0 + k)];
    y[size_t(i)] = float(acc);
  }
  return y;
}

}  // namespace kamera
