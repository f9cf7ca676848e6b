// Next-token sampling: greedy, or temperature with top-k and top-p (nucleus) filtering.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace kamera {

struct SamplerParams {
  float temperature = 0.0f;  // <= 0: greedy (argmax, first on ties)
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {}
  int32_t sample(std::span<const float> logits);

 private:
  SamplerParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

int32_t argmax(std::span<const float> v);

}  // namespace kamera
