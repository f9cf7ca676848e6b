// A naive full-recompute forward over a loaded kamera::Model (scalar loops, double
// accumulation, no KV cache: every call recomputes the whole prefix). Independent of the
// engine's kernels, pool and attention; covers bias, NeoX/normal rope, partial rotary, GQA.
#pragma once

#include <cmath>
#include <vector>

#include "model/model.h"

namespace naive {

// Logits (n_vocab) after the last token; positions[i] is token i's (1-D) position.
// hidden_from[i] lists, per query token i, the key indices it may not attend to (optional).
inline std::vector<float> forward_all(const kamera::Model& m, const std::vector<int>& tokens,
                                      const std::vector<int>& positions,
                                      std::vector<std::vector<float>>* all_logits = nullptr,
                                      const std::vector<std::vector<bool>>* hidden = nullptr,
                                      std::vector<std::vector<float>>* keys_out = nullptr) {
  const auto& c = m.cfg;
  const int n = int(tokens.size()), d = c.dim, hd = c.head_dim;
  auto rms = [&](const std::vector<double>& x, const std::vector<float>& w) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / d + c.rms_eps);
    std::vector<double> y(d);
    for (int i = 0; i < d; ++i) y[i] = x[i] * s * w[i];
    return y;
  };
  auto mat = [&](const std::vector<double>& x, const std::vector<float>& w, int in, int out,
                 const std::vector<float>& b) {
    std::vector<double> y(out);
    for (int o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (int i = 0; i < in; ++i) s += x[i] * w[size_t(o) * in + i];
      y[o] = s;
    }
    return y;
  };
  auto rope = [&](std::vector<double>& v, int heads, int pos) {
    const int nr = c.rope.n_rot, half = nr / 2;
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        const double a = pos * c.rope.freq_scale * std::pow(c.rope.theta, -2.0 * i / nr);
        const int i0 = h * hd + (c.rope.layout == kamera::RopeLayout::Normal ? 2 * i : i);
        const int i1 =
            h * hd + (c.rope.layout == kamera::RopeLayout::Normal ? 2 * i + 1 : i + half);
        const double x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * std::cos(a) - x1 * std::sin(a);
        v[i1] = x0 * std::sin(a) + x1 * std::cos(a);
      }
  };
  std::vector<std::vector<double>> x(n, std::vector<double>(d));
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < d; ++i) x[t][i] = m.tok_embd[size_t(tokens[t]) * d + i];
  const int group = c.n_heads / c.n_kv_heads;
  if (keys_out) keys_out->assign(size_t(c.n_layers) * n, {});
  for (int l = 0; l < c.n_layers; ++l) {
    const auto& L = m.layers[l];
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      auto xb = rms(x[t], L.attn_norm);
      q[t] = mat(xb, L.wq, d, c.q_width(), L.bq);
      k[t] = mat(xb, L.wk, d, c.kv_width(), L.bk);
      v[t] = mat(xb, L.wv, d, c.kv_width(), L.bv);
      if (keys_out) (*keys_out)[size_t(l) * n + t].assign(k[t].begin(), k[t].end());  // pre-rope
      rope(q[t], c.n_heads, positions[t]);
      rope(k[t], c.n_kv_heads, positions[t]);
    }
    for (int t = 0; t < n; ++t) {
      std::vector<double> att(c.q_width(), 0.0);
      for (int h = 0; h < c.n_heads; ++h) {
        const int g = h / group;
        std::vector<double> s(t + 1, -INFINITY);
        double mx = -INFINITY;
        for (int j = 0; j <= t; ++j) {
          if (hidden && (*hidden)[t][j]) continue;
          double dd = 0;
          for (int i = 0; i < hd; ++i) dd += q[t][h * hd + i] * k[j][g * hd + i];
          s[j] = dd / std::sqrt(double(hd));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int j = 0; j <= t; ++j) sum += s[j] = std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx);
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < hd; ++i) att[h * hd + i] += s[j] / sum * v[j][g * hd + i];
      }
      auto o = mat(att, L.wo, c.q_width(), d, {});
      for (int i = 0; i < d; ++i) x[t][i] += o[i];
      auto xb = rms(x[t], L.ffn_norm);
      auto gate = mat(xb, L.w_gate, d, c.ffn_dim, {});
      auto up = mat(xb, L.w_up, d, c.ffn_dim, {});
      for (int i = 0; i < c.ffn_dim; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      auto down = mat(gate, L.w_down, c.ffn_dim, d, {});
      for (int i = 0; i < d; ++i) x[t][i] += down[i];
    }
  }
  std::vector<float> last;
  for (int t = 0; t < n; ++t) {
    if (!all_logits && t != n - 1) continue;
    auto xn = rms(x[t], m.out_norm);
    const float* W = m.output_weight();
    std::vector<float> logits(c.n_vocab);
    for (int o = 0; o < c.n_vocab; ++o) {
      double s = 0;
      for (int i = 0; i < d; ++i) s += xn[i] * W[size_t(o) * d + i];
      logits[o] = float(s);
    }
    if (all_logits) all_logits->push_back(logits);
    if (t == n - 1) last = logits;
  }
  return last;
}

}  // namespace naive
