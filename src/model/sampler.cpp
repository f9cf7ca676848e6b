#include "model/sampler.h"

#include <algorithm>
#include <cmath>

namespace kamera {

int32_t argmax(std::span<const float> v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (p_.temperature <= 0.0f) return argmax(logits);
  const int n = int(logits.size());
  cand_.resize(n);
  for (int i = 0; i < n; ++i) cand_[i] = {logits[i] / p_.temperature, i};
  // Sort by descending logit (stable ids on ties) to apply top-k and top-p.
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  int keep = n;
  if (p_.top_k > 0 && p_.top_k < n) {
    std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), by_logit);
    keep = p_.top_k;
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  const float mx = cand_[0].first;
  double sum = 0;
  std::vector<double> prob(keep);
  for (int i = 0; i < keep; ++i) sum += prob[i] = std::exp(double(cand_[i].first) - mx);
  if (p_.top_p < 1.0f) {
    double cum = 0;
    int cut = keep;
    for (int i = 0; i < keep; ++i) {
      cum += prob[i] / sum;
      if (cum >= p_.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    sum = 0;
    for (int i = 0; i < keep; ++i) sum += prob[i];
  }
  const double r = std::uniform_real_distribution<double>(0.0, 1.0)(rng_) * sum;
  double acc = 0;
  for (int i = 0; i < keep; ++i) {
    acc += prob[i];
    if (r < acc) return cand_[i].second;
  }
  return cand_[keep - 1].second;
}

}  // namespace kamera
