// What the generation loop does to the logits before sampling (logit_bias, repetition
// penalties) and the log-probabilities it reports.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

namespace kamera {

// Repetition penalties over the last `last_n` tokens of the context (the prompt's tail, then the
// completion), as llama.cpp applies them: a token seen there gets its logit divided by
// `repeat` when positive (multiplied when negative), then `frequency` times its count and
// `presence` once subtracted.
struct PenaltyParams {
  float repeat = 1.0f;     // 1: off
  float presence = 0.0f;   // 0: off
  float frequency = 0.0f;  // 0: off
  int last_n = 64;
  bool active() const { return repeat != 1.0f || presence != 0.0f || frequency != 0.0f; }
};

class Penalties {
 public:
  explicit Penalties(PenaltyParams p, std::span<const int32_t> history = {});
  void apply(std::span<float> logits) const;
  void accept(int32_t token);

 private:
  PenaltyParams p_;
  std::deque<int32_t> window_;
};

// Adds each (token, bias) to the logits (ids outside the vocabulary are skipped).
void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias);

// log softmax of `logits` at `token`, and the `top` most likely tokens with theirs (most likely
// first, the lower id on ties). Masked tokens (-inf) have -inf.
struct LogprobTop {
  float chosen = 0;
  std::vector<std::pair<int32_t, float>> top;
};
LogprobTop token_logprobs(std::span<const float> logits, int32_t token, int top);

}  // namespace kamera
