// Qwen3-Omni / Qwen3-ASR's audio tower forward (audio/qwen3_audio_encoder.h).
#include "audio/qwen3_audio_encoder.h"

#include <algorithm>

#include "ops/kernels.h"
#include "ops/vision_ops.h"

namespace kamera {

namespace {

using Cfg = Qwen3AudioConfig;

// The k = 3, stride 2, pad 1 convolution's columns over an h x w map of `channels`: output
// (oh, ow) is row oh * OW + ow, holding x(c, 2 oh + kh - 1, 2 ow + kw - 1) at c * 9 + kh * 3 + kw
// (zero outside), x read through at(c, row, col).
template <class At>
void conv_columns(std::vector<float>& cols, int channels, int h, int w, At at) {
  const int oh_n = Cfg::halve(h), ow_n = Cfg::halve(w);
  cols.assign(size_t(oh_n) * ow_n * channels * 9, 0.0f);
  for (int oh = 0; oh < oh_n; ++oh)
    for (int ow = 0; ow < ow_n; ++ow) {
      float* row = cols.data() + (size_t(oh) * ow_n + ow) * channels * 9;
      for (int kh = 0; kh < 3; ++kh) {
        const int i = 2 * oh + kh - 1;
        if (i < 0 || i >= h) continue;
        for (int kw = 0; kw < 3; ++kw) {
          const int j = 2 * ow + kw - 1;
          if (j < 0 || j >= w) continue;
          for (int c = 0; c < channels; ++c) row[size_t(c) * 9 + kh * 3 + kw] = at(c, i, j);
        }
      }
    }
}

}  // namespace

std::vector<LogMel> qwen3_audio_windows(std::span<const float> samples, int n_mels) {
  WhisperMelConfig mc;
  mc.n_mels = n_mels;
  const LogMel all = centered_log_mel(samples, mc);
  std::vector<LogMel> out;
  for (int off = 0; off < all.n_frames; off += Cfg::kWindowFrames) {
    const int len = std::min(Cfg::kWindowFrames, all.n_frames - off);
    LogMel w;
    w.n_mels = n_mels;
    w.n_frames = (len + Cfg::kChunkFrames - 1) / Cfg::kChunkFrames * Cfg::kChunkFrames;
    w.data.assign(size_t(n_mels) * w.n_frames, 0.0f);
    for (int m = 0; m < n_mels; ++m)
      std::copy_n(all.data.begin() + std::ptrdiff_t(size_t(m) * all.n_frames + off), len,
                  w.data.begin() + std::ptrdiff_t(size_t(m) * w.n_frames));
    out.push_back(std::move(w));
  }
  return out;
}

int64_t qwen3_audio_rows(int64_t n_samples) {
  const int64_t frames = n_samples / WhisperMelConfig{}.hop + 1;
  const int64_t whole = frames / Cfg::kWindowFrames, rest = frames % Cfg::kWindowFrames;
  const int64_t chunks = whole * (Cfg::kWindowFrames / Cfg::kChunkFrames) +
                         (rest + Cfg::kChunkFrames - 1) / Cfg::kChunkFrames;
  return chunks * Cfg::chunk_rows();
}

void Qwen3AudioEncoder::chunk(const LogMel& mel, int f0, float* out) {
  const Cfg& c = m_.cfg;
  const int ch = c.conv_ch;
  int h = c.n_mels, w = Cfg::kChunkFrames;  // (mel, time) of the map a convolution reads
  conv_columns(cols_, 1, h, w,
               [&](int, int i, int j) { return mel.data[size_t(i) * mel.n_frames + f0 + j]; });
  for (const QwenLinear* conv : {&m_.w.conv1, &m_.w.conv2, &m_.w.conv3}) {
    if (conv != &m_.w.conv1) {  // the previous map, (row, col, channel) in a_
      conv_columns(cols_, ch, h, w,
                   [&](int k, int i, int j) { return a_[(size_t(i) * w + j) * ch + k]; });
    }
    h = Cfg::halve(h);
    w = Cfg::halve(w);
    a_.resize(size_t(h) * w * ch);
    conv->apply(cols_.data(), h * w, a_.data(), pool_);
    gelu_erf_inplace(a_.data(), int64_t(a_.size()), pool_);
  }
  // time step t's (channel, mel) values, channel-major, through conv_out; then its position
  b_.resize(size_t(w) * ch * h);
  for (int t = 0; t < w; ++t)
    for (int k = 0; k < ch; ++k)
      for (int f = 0; f < h; ++f)
        b_[(size_t(t) * ch + k) * h + f] = a_[(size_t(f) * w + t) * ch + k];
  m_.w.conv_out.apply(b_.data(), w, out, pool_);
  add_inplace(out, m_.w.pos.data(), int64_t(w) * c.dim);
}

Result<std::vector<float>> Qwen3AudioEncoder::window(const LogMel& mel,
                                                     const std::function<bool()>& stop) {
  const Cfg& c = m_.cfg;
  const int n_chunks = mel.n_frames / Cfg::kChunkFrames, rows = Cfg::chunk_rows();
  if (mel.n_mels != c.n_mels || mel.n_frames < 1 || mel.n_frames % Cfg::kChunkFrames != 0 ||
      mel.data.size() != size_t(mel.n_mels) * mel.n_frames)
    return make_error(ErrorCode::InvalidArgument,
                      "{} audio: a window of {} mel bins x {} frames (the tower reads {} bins, "
                      "whole chunks of {} frames)",
                      c.projector, mel.n_mels, mel.n_frames, c.n_mels, Cfg::kChunkFrames);
  if (n_chunks > Cfg::kWindowFrames / Cfg::kChunkFrames || rows > c.n_pos)
    return make_error(ErrorCode::InvalidArgument,
                      "{} audio: a window of {} frames, over the {} the tower attends over",
                      c.projector, mel.n_frames, Cfg::kWindowFrames);
  const int n = n_chunks * rows;
  x_.resize(size_t(n) * c.dim);
  for (int k = 0; k < n_chunks; ++k)
    chunk(mel, k * Cfg::kChunkFrames, x_.data() + size_t(k) * rows * c.dim);
  KAMERA_TRY(layers_.run(m_.w.layers, c.layer_dims(), x_, n, c.projector, stop, pool_));
  layernorm(x_.data(), m_.w.post_ln_w.data(), m_.w.post_ln_b.data(), x_.data(), n, c.dim, c.eps,
            pool_);
  b_.resize(size_t(n) * c.dim);
  m_.w.mlp1.apply(x_.data(), n, b_.data(), pool_);
  gelu_erf_inplace(b_.data(), int64_t(n) * c.dim, pool_);
  std::vector<float> out(size_t(n) * c.out_dim);
  m_.w.mlp2.apply(b_.data(), n, out.data(), pool_);
  return out;
}

Result<std::vector<float>> Qwen3AudioEncoder::encode(std::span<const LogMel> windows,
                                                     const std::function<bool()>& stop) {
  return encode_windows(windows, [&](const LogMel& mel) { return window(mel, stop); });
}

}  // namespace kamera
