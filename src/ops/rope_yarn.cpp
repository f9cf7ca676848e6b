// Per-pair rotary frequencies: plain (theta and a linear position scale) or YaRN's ramp between
// the interpolated and the trained frequency (ops/rope.h, YarnRamp); LongRoPE's per-pair factors
// divide either.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ops/rope.h"

namespace kamera {

namespace {

// The pair index that turns `turns` times over the original context (fractional). Evaluated in
// f32 as ggml does, so the floor/ceil below land on the same pairs as llama.cpp's.
float yarn_pair_of(int n_rot, int orig_ctx, float turns, float theta) {
  const float two_pi = 2.0f * std::numbers::pi_v<float>;
  return float(n_rot) * std::log(float(orig_ctx) / (turns * two_pi)) / (2.0f * std::log(theta));
}

}  // namespace

double RopeDesc::pair_freq(int pair) const {
  // LongRoPE divides the trained frequency of each pair by its factor (ggml's freq_factors)
  const double factor = freq_factors.empty() ? 1.0 : double(freq_factors[size_t(pair)]);
  const double trained = std::pow(theta, -2.0 * pair / double(n_rot)) / factor;
  if (yarn.ext_factor == 0.0) return freq_scale * trained;
  // pairs [0, lo] keep the trained frequency (they turn many times within the original
  // context), pairs from hi on are interpolated, a linear ramp between
  const float t = float(theta);
  const float lo =
      std::max(0.0f, std::floor(yarn_pair_of(n_rot, yarn.orig_ctx, float(yarn.beta_fast), t)));
  const float hi = std::min(
      float(n_rot - 1), std::ceil(yarn_pair_of(n_rot, yarn.orig_ctx, float(yarn.beta_slow), t)));
  const double y = (double(pair) - lo) / std::max(0.001, double(hi) - lo);
  const double r = yarn.ext_factor * (1.0 - std::clamp(y, 0.0, 1.0));
  return trained * (freq_scale * (1.0 - r) + r);
}

}  // namespace kamera
