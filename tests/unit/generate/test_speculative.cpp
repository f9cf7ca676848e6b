// Speculative decoding's two halves in the generation room: the prompt-lookup drafter
// (generate/ngram_draft.h) and the acceptance rule of a drafted token (Generator::step with a
// draft, Sampler::sample_draft): its token follows the plain step's distribution after every
// transform (logit_bias, penalties, a constraint's mask, temperature, top-k, top-p, min-p), a
// token the constraint forbids is never accepted, and greedy keeps the argmax.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "generate/generator.h"
#include "generate/ngram_draft.h"

using namespace kamera;

namespace {

// The upper tail of the chi-square distribution with `df` degrees of freedom: the value it exceeds
// with probability 1e-4 (Wilson-Hilferty; z = 3.719).
double chi2_limit(int df) {
  const double k = df, z = 3.719, a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Forbids one token.
struct Forbid : TokenConstraint {
  int32_t banned;
  explicit Forbid(int32_t t) : banned(t) {}
  void mask(std::span<float> l) override { l[size_t(banned)] = -INFINITY; }
  Status accept(int32_t t) override {
    return t == banned ? Status(make_error(ErrorCode::InvalidArgument, "banned")) : Status::Ok();
  }
  bool complete() const override { return true; }
};

const std::vector<float> kLogits = {2.0f, 1.6f, 1.5f,  1.1f,  0.9f,  0.4f,
                                    0.2f, 0.1f, -0.5f, -1.0f, -3.0f, -4.0f};

GenerateParams sampled() {
  GenerateParams p;
  p.max_tokens = 4;
  p.ignore_eog = true;
  p.sampling.temperature = 0.8f;
  p.sampling.top_k = 9;
  p.sampling.top_p = 0.95f;
  p.sampling.min_p = 0.05f;
  p.penalties.repeat = 1.3f;
  p.penalties.frequency = 0.2f;
  p.logit_bias = {{4, 0.7f}, {0, -0.4f}};
  return p;
}

const std::vector<int32_t> kHistory = {0, 0, 1, 4};

// The plain step's distribution: the same transforms, then the sampler's candidates.
std::map<int32_t, double> plain_distribution(const GenerateParams& p, int32_t forbidden) {
  std::vector<float> l = kLogits;
  apply_logit_bias(l, p.logit_bias);
  Penalties(p.penalties, kHistory).apply(l);
  if (forbidden >= 0) l[size_t(forbidden)] = -INFINITY;
  Sampler s(p.sampling);
  std::map<int32_t, double> out;
  for (const Candidate& c : s.candidates(l)) out[c.id] = c.p;
  return out;
}

// Chi-square of `n` drafted steps (seeds 0..n-1) against the plain distribution.
double chi2_of_drafted_steps(int32_t draft, int32_t forbidden, int n, int* accepted) {
  const GenerateParams base = sampled();
  const std::map<int32_t, double> want = plain_distribution(base, forbidden);
  std::map<int32_t, int> got;
  *accepted = 0;
  for (int i = 0; i < n; ++i) {
    GenerateParams p = base;
    p.sampling.seed = uint64_t(i) * 7919 + 1;
    Forbid f(forbidden);
    Generator g(nullptr, p, kHistory, forbidden >= 0 ? &f : nullptr);
    std::vector<float> l = kLogits;
    const GenStep s = g.step(l, draft);
    ++got[s.token];
    *accepted += s.token == draft;
  }
  double chi2 = 0;
  for (const auto& [t, c] : got)
    if (!want.count(t)) return INFINITY;  // a token the plain step never gives
  for (const auto& [t, pr] : want) {
    const double e = pr * n, o = got.count(t) ? got[t] : 0;
    chi2 += (o - e) * (o - e) / e;
  }
  return chi2;
}

}  // namespace

TEST(NgramDraft, ProposesWhatFollowedTheLatestOccurrenceOfTheLongestSuffix) {
  // ... 5 6 7 8 9 ... 6 7 1 2 ... then the output ends in 5 6 7: the 3-gram's continuation (8 9),
  // not the later 2-gram's (6 7 -> 1 2).
  const std::vector<int32_t> prompt = {1, 5, 6, 7, 8, 9, 3, 6, 7, 1, 2, 4};
  NgramDrafter d(prompt);
  EXPECT_TRUE(d.draft(4).empty());  // 4 never occurred before with a token after it
  d.sync(std::vector<int32_t>{5, 6, 7});
  EXPECT_EQ(d.draft(4), (std::vector<int32_t>{8, 9, 3, 6}));
  EXPECT_EQ(d.draft(2), (std::vector<int32_t>{8, 9}));
  d.sync(std::vector<int32_t>{5, 6, 7, 3});  // "7 3" and "3" occur: 3 was followed by 6
  EXPECT_EQ(d.draft(3), (std::vector<int32_t>{6, 7, 1}));
  // Image rows (negative ids) are never proposed: a draft stops before them.
  NgramDrafter img(std::vector<int32_t>{1, 5, 6, -1, -1, 9, 5});
  EXPECT_EQ(img.draft(4), (std::vector<int32_t>{6}));
}

TEST(NgramDraft, TheDraftLengthFollowsTheAcceptance) {
  NgramParams p;
  p.k_start = 4;
  p.k_max = 8;
  NgramDrafter d(std::vector<int32_t>{1, 2, 3}, p);
  EXPECT_EQ(d.length(), 4);
  d.feedback(4, 4);
  EXPECT_EQ(d.length(), 8);
  d.feedback(8, 8);
  EXPECT_EQ(d.length(), 8);  // at most k_max
  d.feedback(8, 2);
  EXPECT_EQ(d.length(), 3);
  d.feedback(3, 0);
  EXPECT_EQ(d.length(), 1);
}

// Whole rejections in a row: the drafter waits 0, 1, 2, 4, ... steps (at most backoff_max) before
// drafting again; an accepted token ends the waiting.
TEST(NgramDraft, WholeRejectionsMakeItWaitLongerAndLonger) {
  NgramParams p;
  p.backoff_max = 4;
  NgramDrafter d(std::vector<int32_t>{1, 2, 1, 2, 1}, p);
  auto waits = [&] {
    int n = 0;
    while (d.draft(2).empty()) ++n;
    return n;
  };
  std::vector<int> seen;
  for (int i = 0; i < 5; ++i) {
    seen.push_back(waits());
    d.feedback(2, 0);
  }
  EXPECT_EQ(seen, (std::vector<int>{0, 0, 1, 2, 4}));
  EXPECT_EQ(waits(), 4);  // at most backoff_max
  d.feedback(2, 1);
  EXPECT_EQ(waits(), 0);
  d.feedback(2, 0);
  EXPECT_EQ(waits(), 0);  // the first whole rejection after an accepted token: no wait
}

// The accepted-or-resampled token has the plain step's distribution, for a likely draft, an
// unlikely one, and one outside the candidates; a wrong rule (resampling with the draft left in)
// gives the likely draft about p(2 - p) instead of p: a chi-square far past the limit.
TEST(SpeculativeAcceptance, ADraftedStepFollowsThePlainStepsDistribution) {
  const int n = 20000;
  const auto want = plain_distribution(sampled(), -1);
  ASSERT_GE(want.size(), 4u);
  ASSERT_LT(want.size(), kLogits.size());  // the filters cut some tokens
  const int df = int(want.size()) - 1;
  for (int32_t draft : {1, 6, 11}) {
    int accepted = 0;
    const double chi2 = chi2_of_drafted_steps(draft, -1, n, &accepted);
    EXPECT_LT(chi2, chi2_limit(df)) << "draft " << draft;
    const double p = want.count(draft) ? want.at(draft) : 0.0;
    EXPECT_NEAR(double(accepted) / n, p, 0.02) << "draft " << draft;
  }
}

// A token the constraint masks is never accepted, and the rest follow the masked distribution.
TEST(SpeculativeAcceptance, ATokenTheConstraintForbidsIsNeverAccepted) {
  const int n = 20000;
  const auto want = plain_distribution(sampled(), 1);
  int accepted = 0;
  const double chi2 = chi2_of_drafted_steps(1, 1, n, &accepted);
  EXPECT_EQ(accepted, 0);
  EXPECT_LT(chi2, chi2_limit(int(want.size()) - 1));
}

TEST(SpeculativeAcceptance, GreedyKeepsTheArgmax) {
  GenerateParams p;
  p.max_tokens = 4;
  p.ignore_eog = true;
  for (int32_t draft : {0, 3}) {
    Generator g(nullptr, p);
    std::vector<float> l = kLogits;
    EXPECT_EQ(g.step(l, draft).token, 0) << "draft " << draft;  // argmax whatever the draft
  }
}
