#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "model/sampler.h"

using namespace kamera;

namespace {

// The candidate set by a full sort of the vocabulary (the sampler before it stopped sorting):
// logits / T, sorted by (logit desc, id asc); top-k; top-p on the top-k's mass; min-p relative
// to the best. Token -> probability; tokens of probability 0 left out.
std::map<int32_t, double> full_sort_reference(const std::vector<float>& l, const SamplerParams& p) {
  const int n = int(l.size());
  const float mx = *std::max_element(l.begin(), l.end());
  std::vector<std::pair<double, int32_t>> c;
  for (int i = 0; i < n; ++i) c.push_back({(double(l[i]) - mx) / p.temperature, i});
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  int keep = p.top_k > 0 && p.top_k < n ? p.top_k : n;
  std::vector<double> w(keep);
  double sum = 0;
  for (int i = 0; i < keep; ++i) sum += w[i] = std::exp(c[i].first);
  if (p.top_p < 1.0f) {
    double cum = 0;
    for (int i = 0; i < keep; ++i) {
      cum += w[i];
      if (cum >= double(p.top_p) * sum) {
        keep = i + 1;
        break;
      }
    }
  }
  std::map<int32_t, double> out;
  double s = 0;
  for (int i = 0; i < keep; ++i)
    if (w[i] > 0 && w[i] >= double(p.min_p)) s += w[i];
  for (int i = 0; i < keep; ++i)
    if (w[i] > 0 && w[i] >= double(p.min_p)) out[c[i].second] = w[i] / s;
  return out;
}

// Logits of a few shapes: smooth, peaked, flat with many ties, and with masked tokens.
std::vector<float> make_logits(int kind, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, kind == 1 ? 6.0f : 1.0f);
  std::vector<float> l(n);
  for (float& v : l) v = g(rng);
  if (kind == 2)
    for (float& v : l) v = std::round(v * 2.0f) / 2.0f;  // ties everywhere
  if (kind == 3)
    for (int i = 0; i < n; i += 3) l[i] = -std::numeric_limits<float>::infinity();
  return l;
}

}  // namespace

TEST(Sampler, GreedyIsArgmaxFirstOnTies) {
  Sampler s({0.0f, 0, 1.0f, 1});
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(l), 1);
  Sampler k1({1.0f, 1, 1.0f, 2});  // top-k 1 is greedy too
  EXPECT_EQ(k1.sample(l), 1);
}

// The partial selection keeps exactly the tokens a full sort keeps, with the same probabilities,
// for every filter and their combinations, on smooth, peaked, tied and masked logits.
TEST(Sampler, CandidatesEqualTheFullSortReference) {
  const int n = 6000;
  int checked = 0;
  for (int kind = 0; kind < 4; ++kind) {
    const std::vector<float> l = make_logits(kind, n, 100 + kind);
    for (float t : {0.5f, 1.0f, 1.7f})
      for (int k : {0, 1, 40, n - 1})
        for (float p : {1.0f, 0.95f, 0.5f, 0.01f})
          for (float mp : {0.0f, 0.05f}) {
            const SamplerParams sp{t, k, p, 1, mp};
            Sampler s(sp);
            const auto ref = full_sort_reference(l, sp);
            const auto got = s.candidates(l);
            ASSERT_EQ(got.size(), ref.size())
                << "kind " << kind << " T " << t << " k " << k << " p " << p << " min_p " << mp;
            for (const Candidate& c : got) {
              auto it = ref.find(c.id);
              ASSERT_NE(it, ref.end()) << "token " << c.id << " is not in the reference set";
              EXPECT_NEAR(c.p, it->second, 2e-6 * std::max(1.0, it->second * 10));
            }
            ++checked;
          }
  }
  EXPECT_EQ(checked, 4 * 3 * 4 * 4 * 2);
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  std::vector<float> l = {1.0f, 0.0f, -1.0f, 0.5f};
  Sampler s({1.0f, 0, 1.0f, 42});
  const int n = 200000;
  std::vector<int> hits(4, 0);
  for (int i = 0; i < n; ++i) hits[s.sample(l)]++;
  double z = 0;
  for (float v : l) z += std::exp(double(v));
  for (int i = 0; i < 4; ++i) {
    const double p = std::exp(double(l[i])) / z;
    const double sd = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(double(hits[i]) / n, p, 5 * sd) << "token " << i;
  }
}

// Draws follow the candidates' probabilities under top-p and min-p too (not only the set).
TEST(Sampler, FilteredFrequenciesFollowTheCandidates) {
  const std::vector<float> l = make_logits(0, 64, 9);
  Sampler s({0.8f, 0, 0.9f, 11, 0.02f});
  const auto cand = Sampler({0.8f, 0, 0.9f, 11, 0.02f}).candidates(l);
  const int n = 100000;
  std::map<int32_t, int> hits;
  for (int i = 0; i < n; ++i) hits[s.sample(l)]++;
  for (const Candidate& c : cand) {
    const double sd = std::sqrt(c.p * (1 - c.p) / n);
    EXPECT_NEAR(double(hits[c.id]) / n, c.p, 5 * sd + 1e-9) << "token " << c.id;
    hits.erase(c.id);
  }
  EXPECT_TRUE(hits.empty()) << "a token outside the candidate set was drawn";
}

TEST(Sampler, TemperatureSharpens) {
  std::vector<float> l = {1.0f, 0.0f};
  Sampler cold({0.25f, 0, 1.0f, 3}), hot({4.0f, 0, 1.0f, 3});
  int c = 0, h = 0;
  for (int i = 0; i < 20000; ++i) c += cold.sample(l) == 0, h += hot.sample(l) == 0;
  // p(0) = sigmoid(4) = 0.982 when cold, sigmoid(0.25) = 0.562 when hot
  EXPECT_NEAR(c / 20000.0, 0.982, 0.01);
  EXPECT_NEAR(h / 20000.0, 0.562, 0.02);
}

TEST(Sampler, TopPAndTopKCutTheTail) {
  std::vector<float> l = {3.0f, 2.9f, 0.0f, -5.0f, 2.8f};
  Sampler p({1.0f, 0, 0.5f, 5});
  Sampler k({1.0f, 2, 1.0f, 6});
  for (int i = 0; i < 5000; ++i) {
    const int a = p.sample(l), b = k.sample(l);
    EXPECT_TRUE(a == 0 || a == 1) << a;  // 0 and 1 already hold > 50%
    EXPECT_TRUE(b == 0 || b == 1) << b;
  }
}

TEST(Sampler, MaskedTokensAreNeverDrawn) {
  std::vector<float> l(100, 0.0f);
  for (int i = 0; i < 100; i += 2) l[i] = -std::numeric_limits<float>::infinity();
  for (float p : {1.0f, 0.7f}) {
    Sampler s({1.0f, 0, p, 3});
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(s.sample(l) % 2, 1);
  }
}

TEST(Sampler, SameSeedSameSequence) {
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[i] = float(std::sin(i));
  Sampler a({0.9f, 10, 0.95f, 7}), b({0.9f, 10, 0.95f, 7}), c({0.9f, 10, 0.95f, 8});
  std::vector<int> x, y, z;
  for (int i = 0; i < 100; ++i)
    x.push_back(a.sample(l)), y.push_back(b.sample(l)), z.push_back(c.sample(l));
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}
