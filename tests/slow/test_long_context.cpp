// Long sequences: positions far beyond the rope table, micro-batched prefill vs one batch vs
// decode, on a synthetic model. Label `slow`.
#include <gtest/gtest.h>

#include <random>

#include "support/tiny_models.h"

using namespace kamera;

TEST(LongContext, MicroBatchesDecodeAndFarPositionsAgree) {
  auto m = tiny::load(tiny::model_path("qwen2", DType::F32, "ctx=8192"));
  ASSERT_TRUE(m);
  const int n = 3000, tail = 64, V = m->cfg.n_vocab;
  std::mt19937 rng(11);
  std::vector<int32_t> ids(n);
  for (auto& t : ids) t = int32_t(3 + rng() % uint32_t(V - 3));
  // Start far past the precomputed table (65536): angles are evaluated directly there.
  auto pos = tiny::linear_positions(n, 100000);
  auto pool = tiny::pool_for(*m, 4 * n);
  Engine e(*m, 2);
  const SeqId a = pool->create_sequence(), b = pool->create_sequence(), c = pool->create_sequence();
  ForwardOptions all;
  all.logits = LogitsMode::All;
  auto one = e.forward(*pool, a, ForwardInput::from_tokens(ids, pos), all);
  ASSERT_TRUE(one.ok()) << one.message();
  ForwardOptions small = all;
  small.max_batch = 97;
  auto batched = e.forward(*pool, b, ForwardInput::from_tokens(ids, pos), small);
  ASSERT_TRUE(batched.ok());
  EXPECT_LT(tiny::max_abs_diff(*one, *batched), 1e-4);
  auto head = e.forward(
      *pool, c,
      ForwardInput::from_tokens({ids.data(), size_t(n - tail)}, {pos.data(), size_t(n - tail)}));
  ASSERT_TRUE(head.ok());
  double worst = 0;
  for (int t = n - tail; t < n; ++t) {
    auto l = e.forward(*pool, c, ForwardInput::from_tokens({&ids[t], 1}, {&pos[t], 1}));
    ASSERT_TRUE(l.ok());
    worst = std::max(worst, tiny::max_abs_diff(*l, {one->begin() + size_t(t) * V,
                                                    one->begin() + size_t(t + 1) * V}));
  }
  EXPECT_LT(worst, 1e-4);
  // Relative positions are all that matter: the same text at positions 0.. gives the same logits.
  const SeqId d = pool->create_sequence();
  auto at0 = e.forward(
      *pool, d,
      ForwardInput::from_tokens({ids.data(), 500}, {tiny::linear_positions(500).data(), 500}));
  ASSERT_TRUE(at0.ok());
  EXPECT_LT(
      tiny::max_abs_diff(*at0, {one->begin() + size_t(499) * V, one->begin() + size_t(500) * V}),
      2e-4);
  EXPECT_TRUE(pool->check_invariants().ok());
}
