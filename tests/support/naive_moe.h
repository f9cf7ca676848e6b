// Naive DeepSeek-V2 pieces for naive_forward.h, written from Hugging Face's modeling_deepseek
// (DeepseekV2MoE, DeepseekV2YarnRotaryEmbedding, the softmax scale of DeepseekV2Attention), not
// from the engine: double precision, scalar loops, one token at a time.
#pragma once

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <vector>

#include "model/model.h"

namespace naive {

// Radians per position of rotary pair i: theta^(-2i/d) scaled, under YaRN, by a ramp between the
// interpolated (x 1/factor) and the original frequency (HF yarn_find_correction_range and
// yarn_linear_ramp_mask; ext_factor 1).
inline double rope_freq(const kamera::RopeDesc& r, int i) {
  const int dim = r.n_rot;
  const double extra = std::pow(r.theta, -2.0 * i / dim);
  if (r.yarn.ext_factor == 0.0) return r.freq_scale * extra;
  auto corr = [&](double rotations) {
    return dim * std::log(r.yarn.orig_ctx / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(r.theta));
  };
  const double low = std::max(0.0, std::floor(corr(r.yarn.beta_fast)));
  double high = std::min(double(dim - 1), std::ceil(corr(r.yarn.beta_slow)));
  if (high == low) high += 0.001;
  const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
  const double mask = 1.0 - ramp;  // 1: keep the original frequency
  return r.freq_scale * extra * (1.0 - mask) + extra * mask;
}

// The attention's score scale: head_dim^-1/2, times mscale^2 under YaRN (HF yarn_get_mscale with
// mscale_all_dim = 10 * yarn_log_mul; attn_factor multiplies it as llama.cpp's does).
inline double softmax_scale(const kamera::ModelConfig& c) {
  double s = 1.0 / std::sqrt(double(c.head_dim));
  if (c.rope.yarn.ext_factor != 0.0) {
    const double factor = 1.0 / c.rope.freq_scale;
    const double m = c.yarn_attn_factor * (1.0 + c.yarn_log_mul * std::log(factor));
    s *= m * m;
  }
  return s;
}

// SwiGLU of hidden width ffn: w_gate, w_up (ffn x dim), w_down (dim x ffn).
inline std::vector<double> swiglu(const std::vector<double>& x, const float* w_gate,
                                  const float* w_up, const float* w_down, int ffn) {
  const int d = int(x.size());
  std::vector<double> h(ffn), y(d, 0.0);
  for (int o = 0; o < ffn; ++o) {
    double g = 0, u = 0;
    for (int i = 0; i < d; ++i) {
      g += x[i] * w_gate[size_t(o) * d + i];
      u += x[i] * w_up[size_t(o) * d + i];
    }
    h[o] = g / (1.0 + std::exp(-g)) * u;
  }
  for (int o = 0; o < d; ++o)
    for (int i = 0; i < ffn; ++i) y[o] += h[i] * w_down[size_t(o) * ffn + i];
  return y;
}

// DeepseekV2MoE / DeepseekV3MoE on one normed row: the router's softmax or sigmoid scores; V3's
// MoEGate (topk_method noaux_tc) adds e_score_correction_bias to choose, keeps the n_group_used
// groups whose two best biased scores sum highest (the others masked with -inf, as llama.cpp
// does: Hugging Face fills 0.0, the same for the non-negative scores of these files), takes the
// top-k of what is left; the weights are the unbiased scores, optionally renormalized, times
// routed_scaling_factor; then the weighted experts plus the shared experts.
inline std::vector<double> moe(const kamera::ModelConfig& c, const kamera::MoeWeights& w,
                               const std::vector<double>& x) {
  const kamera::MoeConfig& m = c.moe;
  const int d = c.dim, E = m.n_experts, F = m.expert_ffn;
  // the file's values, dequantized
  const std::vector<float> router = w.router.to_f32(), gate_exps = w.gate_exps.to_f32(),
                           up_exps = w.up_exps.to_f32(), down_exps = w.down_exps.to_f32(),
                           gate_shexp = w.gate_shexp.to_f32(), up_shexp = w.up_shexp.to_f32(),
                           down_shexp = w.down_shexp.to_f32();
  std::vector<double> p(E);
  double mx = -INFINITY, sum = 0;
  for (int e = 0; e < E; ++e) {
    p[e] = 0;
    for (int i = 0; i < d; ++i) p[e] += x[i] * router[size_t(e) * d + i];
    mx = std::max(mx, p[e]);
  }
  if (m.gating == kamera::MoeGating::Sigmoid) {
    for (double& v : p) v = 1.0 / (1.0 + std::exp(-v));
  } else {
    for (double& v : p) sum += v = std::exp(v - mx);
    for (double& v : p) v /= sum;
  }
  std::vector<double> choice = p;
  for (size_t e = 0; e < w.exp_probs_b.size(); ++e) choice[e] += w.exp_probs_b[e];
  auto desc = [](const std::vector<double>& v) {
    std::vector<int> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return v[a] > v[b]; });
    return idx;
  };
  if (m.n_groups > 1) {
    const int per = E / m.n_groups;
    std::vector<double> group(m.n_groups);
    for (int g = 0; g < m.n_groups; ++g) {
      std::vector<double> members(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      const auto o = desc(members);
      group[g] = members[o[0]] + members[o[1]];
    }
    const auto kept = desc(group);
    for (int e = 0; e < E; ++e)
      if (std::find(kept.begin(), kept.begin() + m.n_groups_used, e / per) ==
          kept.begin() + m.n_groups_used)
        choice[e] = -INFINITY;
  }
  const std::vector<int> idx = desc(choice);
  double top_sum = 0;
  for (int s = 0; s < m.n_used; ++s) top_sum += p[idx[s]];
  std::vector<double> y(d, 0.0);
  for (int s = 0; s < m.n_used; ++s) {
    const int e = idx[s];
    double wt = m.norm_weights ? p[e] / top_sum : p[e];
    wt *= m.weights_scale;
    const size_t off = size_t(e) * F * d;
    auto ye = swiglu(x, gate_exps.data() + off, up_exps.data() + off, down_exps.data() + off, F);
    for (int i = 0; i < d; ++i) y[i] += wt * ye[i];
  }
  if (m.n_shared > 0) {
    auto ys = swiglu(x, gate_shexp.data(), up_shexp.data(), down_shexp.data(), m.shared_ffn());
    for (int i = 0; i < d; ++i) y[i] += ys[i];
  }
  return y;
}

}  // namespace naive
