#include "generate/logits.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "ops/kernels.h"

namespace kamera {

Penalties::Penalties(PenaltyParams p, std::span<const int32_t> history) : p_(p) {
  const size_t n = std::min(history.size(), size_t(std::max(0, p_.last_n)));
  window_.assign(history.end() - std::ptrdiff_t(n), history.end());
}

void Penalties::accept(int32_t token) {
  if (p_.last_n <= 0) return;
  window_.push_back(token);
  if (int(window_.size()) > p_.last_n) window_.pop_front();
}

void Penalties::apply(std::span<float> logits) const {
  if (!p_.active() || window_.empty()) return;
  std::map<int32_t, int> count;
  for (int32_t t : window_)
    if (t >= 0 && size_t(t) < logits.size()) ++count[t];
  for (const auto& [t, c] : count) {
    float& l = logits[size_t(t)];
    if (p_.repeat != 1.0f) l = l > 0 ? l / p_.repeat : l * p_.repeat;
    l -= float(c) * p_.frequency + p_.presence;
  }
}

void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias) {
  for (const auto& [t, b] : bias)
    if (t >= 0 && size_t(t) < logits.size()) logits[size_t(t)] += b;
}

LogprobTop token_logprobs(std::span<const float> logits, int32_t token, int top) {
  const int n = int(logits.size());
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : logits) mx = v > mx ? v : mx;
  std::vector<float> e(logits.begin(), logits.end());
  for (float& v : e) v -= mx;
  exp_inplace(e.data(), n);
  double sum = 0;
  for (float v : e) sum += v;
  const float log_z = mx + float(std::log(sum));
  LogprobTop out;
  out.chosen = logits[size_t(token)] - log_z;
  const int k = std::clamp(top, 0, n);
  if (k == 0) return out;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[size_t(i)] = i;
  auto before = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] ||
           (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), before);
  for (int i = 0; i < k; ++i)
    out.top.push_back({ids[size_t(i)], logits[size_t(ids[size_t(i)])] - log_z});
  return out;
}

}  // namespace kamera
