// A decode step's rows are batch-invariant on repacked quantized weights: a row's logits are the
// ones it gets alone, to the bit, whatever shares its step (draft rows after it, other sequences'
// rows, a prefill piece). Speculative decoding relies on it: a draft's checked rows must be the
// plain steps' logits, or greedy output differs from plain decoding at near-ties
// (docs/SERVER.md, "Speculative decoding").
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "ops/quant.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

constexpr int kDraft = 8;  // the server's default longest draft: 9 rows, past the GEMM threshold

std::vector<float> prefill(Engine& e, KvPool& pool, SeqId s, const std::vector<int32_t>& ids) {
  auto r =
      e.forward(pool, s, ForwardInput::from_tokens(ids, tiny::linear_positions(int(ids.size()))),
                ForwardOptions{});
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : std::vector<float>{};
}

int32_t argmax(std::span<const float> v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

struct Rig {
  std::unique_ptr<Model> m;
  std::unique_ptr<KvPool> pool;
  std::unique_ptr<Engine> e;
  std::vector<int32_t> prompt;
  int V = 0;
  // head_dim: the heads' width (0: the preset's; which shapes made the old GEMM path round
  // otherwise than the per-row kernels varied with the width and the data: 32 and 128 both
  // caught it); prompt_tokens: the context the steps attend over.
  Rig(const std::string& arch, int head_dim, int prompt_tokens) {
    std::string dims = "ctx=4096";
    if (head_dim > 0) dims += ",head_dim=" + std::to_string(head_dim);
    m = tiny::load(tiny::model_path(arch, DType::Q8_0, dims));
    if (!m) return;
    V = m->cfg.n_vocab;
    pool = tiny::pool_for(*m, prompt_tokens * 3 + 64);
    e = std::make_unique<Engine>(*m, 2);
    prompt = tiny::random_tokens(prompt_tokens, V, 5);
  }
  SeqId fresh() {
    const SeqId s = pool->create_sequence();
    prefill(*e, *pool, s, prompt);
    return s;
  }
  // Plain decoding: kDraft + 1 steps of one row from `first`, each step's logits; tokens greedy.
  std::vector<std::vector<float>> plain(SeqId s, int32_t first, std::vector<int32_t>* tokens) {
    std::vector<std::vector<float>> out;
    int32_t tok = first;
    for (int t = 0; t <= kDraft; ++t) {
      tokens->push_back(tok);
      const Engine::DecodeRow r{s, tok, Pos::linear(int(prompt.size()) + t)};
      auto l = e->decode(*pool, {&r, 1});
      EXPECT_TRUE(l.ok()) << l.message();
      out.push_back(l.ok() ? *l : std::vector<float>{});
      tok = argmax(out.back());
    }
    return out;
  }
};

using Case = std::tuple<std::string, int, int>;  // family, head width (0: preset's), prompt
class DecodeInvariance : public testing::TestWithParam<Case> {};

}  // namespace

// The precondition: the tiny Q8_0 models' matrices are repacked (their integer kernels give each
// row the same floats at any row count: QuantRepack's tests).
TEST_P(DecodeInvariance, DraftRowsGiveThePlainStepsLogitsToTheBit) {
  Rig r(std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()));
  ASSERT_TRUE(r.m);
  ASSERT_NE(r.m->output_weight().layout(), WeightLayout::Rows);
  std::vector<int32_t> toks;
  const auto want = r.plain(r.fresh(), 11, &toks);
  // The same tokens as one row and its draft.
  const SeqId s = r.fresh();
  const Engine::DecodeRow row{s, toks[0], Pos::linear(int(r.prompt.size())),
                              std::span<const int32_t>(toks).subspan(1)};
  auto got = r.e->decode(*r.pool, {&row, 1});
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_EQ(got->size(), size_t(kDraft + 1) * size_t(r.V));
  for (int t = 0; t <= kDraft; ++t) {
    const std::vector<float> mine(got->begin() + std::ptrdiff_t(t) * r.V,
                                  got->begin() + std::ptrdiff_t(t + 1) * r.V);
    EXPECT_EQ(mine, want[size_t(t)])
        << "draft row " << t << ", max |diff| " << tiny::max_abs_diff(mine, want[size_t(t)]);
  }
}

// Other sequences' rows (with drafts) and a prefill piece in the same step change nothing.
TEST_P(DecodeInvariance, OtherRowsAndAPieceInTheStepChangeNothing) {
  Rig r(std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()));
  ASSERT_TRUE(r.m);
  const SeqId alone = r.fresh(), shared = r.fresh(), other = r.fresh();
  const int at = int(r.prompt.size());
  const Engine::DecodeRow one{alone, 17, Pos::linear(at)};
  auto want = r.e->decode(*r.pool, {&one, 1});
  ASSERT_TRUE(want.ok()) << want.message();
  const std::vector<int32_t> draft = {3, 4, 5, 6, 7, 8, 9, 10};
  const std::vector<Engine::DecodeRow> rows = {{other, 5, Pos::linear(at), draft},
                                               {shared, 17, Pos::linear(at)}};
  const SeqId fill = r.pool->create_sequence();
  const auto ids = tiny::random_tokens(24, r.V, 9);
  auto cur =
      r.e->begin_forward(*r.pool, fill, ForwardInput::from_tokens(ids, tiny::linear_positions(24)));
  ASSERT_TRUE(cur.ok()) << cur.message();
  const Engine::Piece piece{&*cur, 24};
  auto got = r.e->decode(*r.pool, rows, {&piece, 1});
  ASSERT_TRUE(got.ok()) << got.message();
  const std::vector<float> mine(got->begin() + std::ptrdiff_t(draft.size() + 1) * r.V,
                                got->begin() + std::ptrdiff_t(draft.size() + 2) * r.V);
  EXPECT_EQ(mine, *want) << "max |diff| " << tiny::max_abs_diff(mine, *want);
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  const auto& [family, width, prompt] = i.param;
  return family + "_hd" + std::to_string(width) + "_" + std::to_string(prompt);
}

INSTANTIATE_TEST_SUITE_P(Families, DecodeInvariance,
                         testing::Combine(testing::Values("llama", "qwen2", "qwen3", "gemma3",
                                                          "phi3"),
                                          testing::Values(32, 128), testing::Values(37, 1200)),
                         case_name);
// MLA: its heads' widths are the latent's (the preset's).
INSTANTIATE_TEST_SUITE_P(Mla, DecodeInvariance,
                         testing::Combine(testing::Values("deepseek2"), testing::Values(0),
                                          testing::Values(37, 1200)),
                         case_name);
