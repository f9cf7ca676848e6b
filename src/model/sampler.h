// Next-token sampling: greedy, or temperature with top-k, top-p (nucleus) and min-p filtering,
// applied in that order as Hugging Face's warpers do: the logits are divided by the temperature,
// top-k keeps the k most likely, top-p the smallest most-likely prefix of those whose mass
// reaches p (of the top-k's mass), min-p the ones at least min_p times as likely as the best.
// Ties are broken by the lower id.
//
// No sort of the vocabulary: one pass takes the maximum, one computes exp((l - max) / T) and a
// histogram of the mass by log-probability (1/16 nat buckets), which tells which tokens the
// nucleus holds whole and which single bucket its edge falls in; only that bucket is ordered,
// by a weighted selection (linear on average). top-k is a linear selection too. The candidate
// set and its probabilities are those of a full sort (tests/unit/model/test_sampler.cpp checks
// them against one).
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
  float min_p = 0.0f;  // 0: off
};

// A token that may be sampled and its probability (the candidates' probabilities sum to 1).
struct Candidate {
  int32_t id;
  double p;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {}
  int32_t sample(std::span<const float> logits);
  // Speculative decoding's acceptance rule for a token proposed by a deterministic drafter (a
  // point-mass draft distribution): `draft` is kept with the probability sample() would give it,
  // else a token is drawn from sample()'s distribution without it (renormalised). The token
  // returned therefore has exactly sample()'s distribution; it equals `draft` iff the draft was
  // accepted. Greedy: the argmax (accepted iff it is the draft).
  int32_t sample_draft(std::span<const float> logits, int32_t draft);
  // The tokens sample() draws from and their probabilities, in no particular order (greedy: the
  // argmax with probability 1). Consumes no randomness.
  std::vector<Candidate> candidates(std::span<const float> logits);
  const SamplerParams& params() const { return p_; }

 private:
  // Fills w_ and the candidate set (every token when all_, else ids_); returns the sum of the
  // candidates' weights.
  double filter(std::span<const float> logits);
  void keep_top_k(std::span<const float> logits, int k);
  void keep_nucleus(std::span<const float> logits);
  void keep_min_p();

  SamplerParams p_;
  std::mt19937_64 rng_;
  std::vector<int32_t> ids_;  // the candidates, unless all_
  bool all_ = true;           // every token is a candidate
  std::vector<float> w_;      // exp((logit - max) / T) of every token of the vocabulary
  std::vector<float> vals_;   // top-k's selection
  std::vector<int32_t> keep_, edge_;
  float mx_ = 0, inv_t_ = 1;  // the largest logit, 1 / temperature
};

int32_t argmax(std::span<const float> v);

}  // namespace kamera
