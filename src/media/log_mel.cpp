// Whisper's log-mel spectrogram (media/log_mel.h).
#include "media/log_mel.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kamera {

namespace {

constexpr double kMelFloor = 1e-10;

// Slaney's mel scale (librosa's default, htk=False).
double hz_to_mel(double f) {
  const double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, logstep = std::log(6.4) / 27.0;
  return f < min_log_hz ? f / f_sp : min_log_hz / f_sp + std::log(f / min_log_hz) / logstep;
}
double mel_to_hz(double m) {
  const double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, logstep = std::log(6.4) / 27.0;
  const double min_log_mel = min_log_hz / f_sp;
  return m < min_log_mel ? m * f_sp : min_log_hz * std::exp(logstep * (m - min_log_mel));
}

// The DFT's basis: cos and sin of 2 pi k n / N for the bins 0 .. N/2 (row k, N values).
struct DftBasis {
  int n = 0, bins = 0;
  std::vector<double> cos_t, sin_t;
  explicit DftBasis(int n_fft) : n(n_fft), bins(n_fft / 2 + 1) {
    cos_t.resize(size_t(bins) * n);
    sin_t.resize(size_t(bins) * n);
    for (int k = 0; k < bins; ++k)
      for (int t = 0; t < n; ++t) {
        const int r = int((int64_t(k) * t) % n);  // the angle reduced exactly
        const double a = 2.0 * std::numbers::pi * r / n;
        cos_t[size_t(k) * n + t] = std::cos(a);
        sin_t[size_t(k) * n + t] = std::sin(a);
      }
  }
};

// One frame's mel energies (before the log) into mel[0 .. n_mels).
void frame_mel(const DftBasis& b, const double* frame, const std::vector<double>& filters,
               int n_mels, std::vector<double>& power, double* mel) {
  for (int k = 0; k < b.bins; ++k) {
    const double* c = b.cos_t.data() + size_t(k) * b.n;
    const double* s = b.sin_t.data() + size_t(k) * b.n;
    double re = 0.0, im = 0.0;
    for (int t = 0; t < b.n; ++t) {
      re += frame[t] * c[t];
      im += frame[t] * s[t];
    }
    power[size_t(k)] = re * re + im * im;
  }
  for (int m = 0; m < n_mels; ++m) {
    const double* f = filters.data() + size_t(m) * b.bins;
    double e = 0.0;
    for (int k = 0; k < b.bins; ++k) e += f[k] * power[size_t(k)];
    mel[m] = e;
  }
}

}  // namespace

std::vector<double> slaney_mel_filters(const WhisperMelConfig& c) {
  const int bins = c.n_fft / 2 + 1;
  const double m_lo = hz_to_mel(0.0), m_hi = hz_to_mel(c.sample_rate / 2.0);
  std::vector<double> edges(size_t(c.n_mels) + 2);
  for (size_t i = 0; i < edges.size(); ++i)
    edges[i] = mel_to_hz(m_lo + (m_hi - m_lo) * double(i) / double(c.n_mels + 1));
  std::vector<double> out(size_t(c.n_mels) * bins, 0.0);
  for (int m = 0; m < c.n_mels; ++m) {
    const double l = edges[size_t(m)], ctr = edges[size_t(m) + 1], r = edges[size_t(m) + 2];
    const double enorm = 2.0 / (r - l);
    for (int k = 0; k < bins; ++k) {
      const double f = double(k) * (c.sample_rate / 2.0) / double(bins - 1);
      const double down = (f - l) / (ctr - l), up = (r - f) / (r - ctr);
      out[size_t(m) * bins + k] = std::max(0.0, std::min(down, up)) * enorm;
    }
  }
  return out;
}

namespace {

// The log10 mel energies of `frames` frames (frame f: n_fft samples from f * hop - n_fft / 2 of
// the padded signal, read through at(i)), a mel bin's frames contiguous; frames that start at or
// after `silent_from` hold padding alone (every bin at the floor, no DFT). *top: the largest.
template <class At>
std::vector<float> log10_mel(const WhisperMelConfig& c, int64_t frames, int64_t silent_from, At at,
                             float* top) {
  const int64_t half = c.n_fft / 2;
  std::vector<double> hann(size_t(c.n_fft));
  for (int t = 0; t < c.n_fft; ++t)
    hann[size_t(t)] = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * t / c.n_fft);
  const DftBasis basis(c.n_fft);
  const std::vector<double> filters = slaney_mel_filters(c);
  std::vector<double> frame(size_t(c.n_fft)), power(size_t(basis.bins)), mel(size_t(c.n_mels));
  std::vector<float> logmel(size_t(c.n_mels) * frames);
  *top = -INFINITY;
  for (int64_t f = 0; f < frames; ++f) {
    const int64_t start = f * c.hop - half;
    if (start >= silent_from) {
      std::fill(mel.begin(), mel.end(), 0.0);
    } else {
      for (int t = 0; t < c.n_fft; ++t) frame[size_t(t)] = hann[size_t(t)] * at(start + t);
      frame_mel(basis, frame.data(), filters, c.n_mels, power, mel.data());
    }
    for (int m = 0; m < c.n_mels; ++m) {
      const float v = float(std::log10(std::max(mel[size_t(m)], kMelFloor)));
      logmel[size_t(m) * frames + f] = v;
      *top = std::max(*top, v);
    }
  }
  return logmel;
}

// Whisper's clamp and scale: max(x, top - 8), then (x + 4) / 4.
float whisper_scale(float v, float top) {
  return (std::max(v, top - 8.0f) + 4.0f) / 4.0f;
}

}  // namespace

std::vector<LogMel> whisper_log_mel(std::span<const float> samples, const WhisperMelConfig& c) {
  const int64_t n = int64_t(samples.size());
  const int64_t padded_n = n + int64_t(c.sample_rate) * 30;  // the clip and 30 s of zeros
  const int64_t total_frames = padded_n / c.hop + 1;         // frames of padded_n + 2 half
  const int64_t windows = std::max<int64_t>(1, total_frames / c.window_frames);
  const int64_t frames = windows * c.window_frames;
  // sample i of the clip's reflect-padded signal (index -half .. padded_n + half)
  auto sample = [&](int64_t i) -> double {
    if (i < 0) i = -i;  // reflection about sample 0 (n > half for this to stay inside the clip)
    return i < n ? double(samples[size_t(i)]) : 0.0;
  };
  float top = 0;
  const std::vector<float> logmel = log10_mel(c, frames, n, sample, &top);
  std::vector<LogMel> out(static_cast<size_t>(windows));
  for (int64_t w = 0; w < windows; ++w) {
    LogMel& o = out[size_t(w)];
    o.n_mels = c.n_mels;
    o.n_frames = c.window_frames;
    o.data.resize(size_t(c.n_mels) * c.window_frames);
    for (int m = 0; m < c.n_mels; ++m)
      for (int f = 0; f < c.window_frames; ++f) {
        const float v = logmel[size_t(m) * frames + w * c.window_frames + f];
        o.data[size_t(m) * c.window_frames + f] = whisper_scale(v, top);
      }
  }
  return out;
}

LogMel centered_log_mel(std::span<const float> samples, const WhisperMelConfig& c) {
  const int64_t n = int64_t(samples.size());
  const int64_t frames = n / c.hop + 1;  // frames of n + 2 half samples
  // sample i of the clip reflected about its first and its last sample (zero past the clip's
  // other end, as llama.cpp pads a clip shorter than half a window)
  auto sample = [&](int64_t i) -> double {
    const int64_t j = i < 0 ? -i : i < n ? i : 2 * n - 2 - i;
    return j >= 0 && j < n ? double(samples[size_t(j)]) : 0.0;
  };
  float top = 0;
  LogMel o;
  o.n_mels = c.n_mels;
  o.n_frames = int(frames);
  o.data = log10_mel(c, frames, n + c.n_fft, sample, &top);
  for (float& v : o.data) v = whisper_scale(v, top);
  return o;
}

}  // namespace kamera
