#include "vision/llava_ldp.h"

#include <algorithm>

#include "ops/vision_ops.h"

namespace kamera {

namespace {

// out[i, j] (+)= sum over the 3 x 3 window of `in` (a side x side grid, zero padded) around
// (stride i, stride j), per channel, with kernel k (channel, ky, kx).
std::vector<float> depthwise3x3(const std::vector<float>& in, int side, size_t o,
                                const std::vector<float>& k, int stride) {
  const int n = (side - 1) / stride + 1;  // (side + 2 - 3) / stride + 1
  std::vector<float> out(size_t(n) * n * o, 0.0f);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      float* dst = out.data() + (size_t(i) * n + j) * o;
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) {
          const int yy = i * stride + ky - 1, xx = j * stride + kx - 1;
          if (yy < 0 || yy >= side || xx < 0 || xx >= side) continue;
          const float* src = in.data() + (size_t(yy) * side + xx) * o;
          for (size_t c = 0; c < o; ++c) dst[c] += k[c * 9 + size_t(ky * 3 + kx)] * src[c];
        }
    }
  return out;
}

float hardsigmoid(float x) {
  return std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f;
}

// One InvertedResidual block (expand ratio 1) on the side x side grid x; stride 1 adds x.
std::vector<float> ldp_block(const LlavaVisionConfig& c, const LlavaVisionWeights::LdpBlock& b,
                             const std::vector<float>& x, int side, int stride, ThreadPool* pool) {
  const size_t o = size_t(c.out_dim);
  std::vector<float> h = depthwise3x3(x, side, o, b.dw, stride);
  const int64_t n = int64_t(h.size() / o);
  layernorm(h.data(), b.ln1_w.data(), b.ln1_b.data(), h.data(), n, c.out_dim, c.eps, pool);
  for (float& v : h) v *= hardsigmoid(v);  // hardswish
  std::vector<float> mean(o, 0.0f), sq(size_t(b.fc1.out)), scale(o);
  for (int64_t r = 0; r < n; ++r)
    for (size_t k = 0; k < o; ++k) mean[k] += h[size_t(r) * o + k] / float(n);
  b.fc1.apply(mean.data(), 1, sq.data(), nullptr);
  for (float& v : sq) v = std::max(v, 0.0f);
  b.fc2.apply(sq.data(), 1, scale.data(), nullptr);
  for (int64_t r = 0; r < n; ++r)
    for (size_t k = 0; k < o; ++k) h[size_t(r) * o + k] *= hardsigmoid(scale[k]);
  std::vector<float> out(h.size());
  b.pw.apply(h.data(), n, out.data(), pool);
  layernorm(out.data(), b.ln2_w.data(), b.ln2_b.data(), out.data(), n, c.out_dim, c.eps, pool);
  if (stride == 1)
    for (size_t i = 0; i < out.size(); ++i) out[i] += x[i];
  return out;
}

}  // namespace

std::vector<float> ldpv2_project(const LlavaVisionModel& m, const std::vector<float>& y) {
  const int s = m.cfg.side(), h = s / 2;
  const size_t o = size_t(m.cfg.out_dim);
  std::vector<float> p(size_t(h) * h * o, 0.0f);
  for (int i = 0; i < h; ++i)
    for (int j = 0; j < h; ++j) {
      float* dst = p.data() + (size_t(i) * h + j) * o;
      for (int dy = 0; dy < 2; ++dy)
        for (int dx = 0; dx < 2; ++dx) {
          const float* src = y.data() + (size_t(2 * i + dy) * s + size_t(2 * j + dx)) * o;
          for (size_t k = 0; k < o; ++k) dst[k] += 0.25f * src[k];
        }
    }
  std::vector<float> z = depthwise3x3(p, h, o, m.w.peg_w, 1);
  for (size_t r = 0; r < z.size() / o; ++r)
    for (size_t k = 0; k < o; ++k) z[r * o + k] += m.w.peg_b[k] + p[r * o + k];
  return z;
}

std::vector<float> ldp_project(const LlavaVisionModel& m, const std::vector<float>& y,
                               ThreadPool* pool) {
  const int s = m.cfg.side();
  const std::vector<float> a = ldp_block(m.cfg, m.w.ldp[0], y, s, 1, pool);
  return ldp_block(m.cfg, m.w.ldp[1], a, s, 2, pool);
}

}  // namespace kamera
