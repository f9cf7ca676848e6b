// Qwen2.5-Omni's audio tower forward (audio/audio_encoder.h).
#include "audio/audio_encoder.h"

#include "ops/kernels.h"
#include "ops/vision_ops.h"

namespace kamera {

namespace {

// The k = 3, pad 1 convolution's columns: row t holds x[c][t * stride + k - 1] at c * 3 + k
// (zero outside), x read through at(c, i) for channel c < channels and position i < n_in.
template <class At>
void conv_columns(std::vector<float>& cols, int n_out, int channels, int stride, int n_in, At at) {
  cols.assign(size_t(n_out) * channels * 3, 0.0f);
  for (int t = 0; t < n_out; ++t) {
    float* row = cols.data() + size_t(t) * channels * 3;
    for (int k = 0; k < 3; ++k) {
      const int i = t * stride + k - 1;
      if (i < 0 || i >= n_in) continue;
      for (int c = 0; c < channels; ++c) row[size_t(c) * 3 + k] = at(c, i);
    }
  }
}

}  // namespace

Result<std::vector<float>> QwenAudioEncoder::transformer(const LogMel& mel,
                                                         const std::function<bool()>& stop) {
  const QwenAudioConfig& c = m_.cfg;
  const int frames = mel.n_frames, n = QwenAudioConfig::positions(frames), d = c.dim;
  if (mel.n_mels != c.n_mels || frames < 2 || mel.data.size() != size_t(c.n_mels) * frames)
    return make_error(ErrorCode::InvalidArgument,
                      "{} audio: a window of {} mel bins x {} frames (the tower reads {} bins)",
                      c.projector, mel.n_mels, frames, c.n_mels);
  if (n > c.n_pos)
    return make_error(ErrorCode::InvalidArgument,
                      "{} audio: {} frames make {} positions, the table has {}", c.projector,
                      frames, n, c.n_pos);
  // conv1 over the mel frames, then conv2 (stride 2) over conv1's rows
  conv_columns(cols_, frames, c.n_mels, 1, frames,
               [&](int ch, int i) { return mel.data[size_t(ch) * frames + i]; });
  y1_.resize(size_t(frames) * d);
  m_.w.conv1.apply(cols_.data(), frames, y1_.data(), pool_);
  gelu_erf_inplace(y1_.data(), int64_t(frames) * d, pool_);
  conv_columns(cols_, n, d, 2, frames, [&](int ch, int i) { return y1_[size_t(i) * d + ch]; });
  x_.resize(size_t(n) * d);
  m_.w.conv2.apply(cols_.data(), n, x_.data(), pool_);
  gelu_erf_inplace(x_.data(), int64_t(n) * d, pool_);
  add_inplace(x_.data(), m_.w.pos.data(), int64_t(n) * d);
  KAMERA_TRY(layers_.run(m_.w.layers, c.layer_dims(), x_, n, c.projector, stop, pool_));
  return std::vector<float>(x_.begin(), x_.begin() + std::ptrdiff_t(size_t(n) * d));
}

Result<std::vector<float>> QwenAudioEncoder::window(const LogMel& mel,
                                                    const std::function<bool()>& stop) {
  const QwenAudioConfig& c = m_.cfg;
  KAMERA_ASSIGN_OR_RETURN(const std::vector<float> h, transformer(mel, stop));
  const int d = c.dim, rows = QwenAudioConfig::rows(mel.n_frames);
  std::vector<float> pooled(size_t(rows) * d);  // AvgPool1d(2, stride 2) over positions
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < d; ++j)
      pooled[size_t(r) * d + j] = 0.5f * (h[size_t(2 * r) * d + j] + h[size_t(2 * r + 1) * d + j]);
  layernorm(pooled.data(), m_.w.post_ln_w.data(), m_.w.post_ln_b.data(), pooled.data(), rows, d,
            c.eps, pool_);
  std::vector<float> out(size_t(rows) * c.out_dim);
  m_.w.proj.apply(pooled.data(), rows, out.data(), pool_);
  return out;
}

Result<std::vector<float>> QwenAudioEncoder::encode(std::span<const LogMel> windows,
                                                    const std::function<bool()>& stop) {
  return encode_windows(windows, [&](const LogMel& mel) { return window(mel, stop); });
}

}  // namespace kamera
