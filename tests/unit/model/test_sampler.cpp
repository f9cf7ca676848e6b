#include <gtest/gtest.h>

#include <cmath>

#include "model/sampler.h"

using namespace kamera;

TEST(Sampler, GreedyIsArgmaxFirstOnTies) {
  Sampler s({0.0f, 0, 1.0f, 1});
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(l), 1);
  Sampler k1({1.0f, 1, 1.0f, 2});  // top-k 1 is greedy too
  EXPECT_EQ(k1.sample(l), 1);
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
