// End-to-end agreement of the engine with an independent naive implementation on real models.
#include <gtest/gtest.h>

#include <cmath>

#include "context/context.h"
#include "model/forward.h"
#include "model/sampler.h"
#include "support/naive_llama.h"
#include "support/paths.h"

using namespace kamera;

namespace {

std::unique_ptr<KvPool> make_pool(const Model& m, int tokens) {
  auto pool = KvPool::create(pool_params(m, tokens));
  EXPECT_TRUE(pool.ok()) << pool.message();
  return std::move(pool.value());
}

// Greedy decode with the engine vs the naive model, token for token, and logits within tol.
void expect_greedy_agreement(const std::string& model_path, int steps, double logit_tol) {
  naive::Llama ref;
  ASSERT_TRUE(ref.load_v0(model_path));
  auto m = load_model(model_path);
  ASSERT_TRUE(m.ok()) << m.message();
  steps = std::min(steps, (*m)->cfg.ctx_len);
  auto pool = make_pool(**m, steps);
  Engine engine(**m, 2);
  const SeqId seq = pool->create_sequence();
  int32_t tok = 1;  // BOS
  int agree = 0;
  double max_diff = 0;
  for (int pos = 0; pos < steps; ++pos) {
    const Pos p = Pos::linear(pos);
    auto logits = engine.forward(*pool, seq, ForwardInput::from_tokens({&tok, 1}, {&p, 1}));
    ASSERT_TRUE(logits.ok()) << logits.message();
    const std::vector<float> want = ref.forward(tok, pos);
    for (size_t i = 0; i < want.size(); ++i)
      max_diff = std::max(max_diff, double(std::fabs((*logits)[i] - want[i])));
    const int32_t a = argmax(*logits), b = argmax(want);
    ASSERT_EQ(a, b) << "greedy token differs at position " << pos << " after " << agree
                    << " agreeing tokens";
    ++agree;
    tok = a;
  }
  EXPECT_GE(agree, std::min(200, steps));
  EXPECT_LT(max_diff, logit_tol) << "max |logit difference| over all steps";
  std::printf("  %d greedy tokens agree; max |logit diff| %.3g\n", agree, max_diff);
}

}  // namespace

TEST(Golden, Stories260KGreedyMatchesNaive) {
  const std::string path = test_paths::stories_dir() + "/stories260K.bin";
  REQUIRE_MODEL_FILE(path);
  expect_greedy_agreement(path, 256, 1e-3);
}

TEST(Golden, Aidreams260KGreedyMatchesNaive) {
  const std::string path = test_paths::aidreams_dir() + "/aidreams260K.bin";
  REQUIRE_MODEL_FILE(path);
  expect_greedy_agreement(path, 128, 1e-3);
}
