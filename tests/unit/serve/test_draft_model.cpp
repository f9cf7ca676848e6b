// The draft model of speculative decoding (serve/draft_model.h): its drafts are the draft model's
// own greedy continuation (checked against an independent greedy loop of Engine::forward on a
// fresh context), also after the mirror sequence rolled back a rejected draft and took other
// tokens, for several sequences drafted in one batch; p-min cuts drafts; a draft of another
// vocabulary is refused by name.
#include <gtest/gtest.h>

#include <algorithm>

#include "serve/draft_model.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

const std::string kDims = "ctx=1024";

// The reference: k greedy tokens after `history`, each forward from scratch on a fresh context.
std::vector<int32_t> greedy(const std::string& path, std::vector<int32_t> history, int k) {
  auto ctx = tiny::context(path, 2048);
  std::vector<int32_t> out;
  for (int i = 0; i < k; ++i) {
    const SeqId s = ctx->pool().create_sequence();
    const auto pos = tiny::linear_positions(int(history.size()));
    auto l = ctx->engine().forward(ctx->pool(), s, ForwardInput::from_tokens(history, pos));
    EXPECT_TRUE(l.ok()) << l.message();
    const int32_t t = int32_t(std::max_element(l->begin(), l->end()) - l->begin());
    out.push_back(t);
    history.push_back(t);
    ctx->pool().free_sequence(s);
  }
  return out;
}

std::unique_ptr<DraftModel> draft_model(const std::string& path, float p_min = 0) {
  DraftOptions o;
  o.max = 8;
  o.p_min = p_min;
  o.kv_tokens = 4096;
  auto target = tiny::load(tiny::model_path("qwen2", DType::F32, kDims));
  auto d = DraftModel::load(path, *target, o);
  EXPECT_TRUE(d.ok()) << d.message();
  return d.ok() ? std::move(*d) : nullptr;
}

}  // namespace

TEST(DraftModel, DraftsAreTheDraftsGreedyContinuationAcrossRollbacks) {
  const std::string path = tiny::model_path("qwen2", DType::F32, kDims, /*seed=*/11);
  auto d = draft_model(path);
  ASSERT_TRUE(d);
  std::vector<std::vector<int32_t>> hist = {tiny::random_tokens(40, 256, 1),
                                            tiny::random_tokens(23, 256, 2)};
  auto s0 = d->sequence(), s1 = d->sequence();
  for (int round = 0; round < 3; ++round) {
    std::vector<DraftModel::Ask> asks = {{s0.get(), hist[0], 6, {}}, {s1.get(), hist[1], 4, {}}};
    d->draft(asks);
    for (size_t i = 0; i < asks.size(); ++i) {
      EXPECT_EQ(asks[i].out, greedy(path, hist[i], asks[i].k)) << "round " << round << " seq " << i;
      // The target "accepts" the first two draft tokens, then takes a token of its own: the
      // mirror must roll back the rest before the next draft.
      hist[i].insert(hist[i].end(), asks[i].out.begin(), asks[i].out.begin() + 2);
      hist[i].push_back(int32_t(5 + round * 7 + int(i)));
    }
  }
}

TEST(DraftModel, PMinStopsTheDraftAtAnUnsureToken) {
  const std::string path = tiny::model_path("qwen2", DType::F32, kDims, 11);
  auto sure = draft_model(path, 1.0f);  // no token of a random model is certain
  ASSERT_TRUE(sure);
  const std::vector<int32_t> h = tiny::random_tokens(30, 256, 3);
  auto s = sure->sequence();
  std::vector<DraftModel::Ask> asks = {{s.get(), h, 8, {}}};
  sure->draft(asks);
  EXPECT_TRUE(asks[0].out.empty());
  // A bias that makes one token certain: drafted at every position.
  const std::vector<std::pair<int32_t, float>> bias = {{77, 200.0f}};
  asks = {{s.get(), h, 5, bias}};
  sure->draft(asks);
  EXPECT_EQ(asks[0].out, std::vector<int32_t>(5, 77));
}

TEST(DraftModel, AnotherVocabularyIsRefusedByName) {
  auto target = tiny::load(tiny::model_path("qwen2", DType::F32, kDims));
  // Vocabularies 300 tokens apart.
  const std::string big = tiny::model_path("qwen2", DType::F32, kDims + ",vocab=812");
  auto d = DraftModel::load(big, *target, {});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("--model-draft " + big), std::string::npos) << d.message();
  EXPECT_NE(d.message().find("812 tokens vs the target's 512"), std::string::npos) << d.message();
  // One piece replaced by a control token: the same size, one text differs.
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(Arch::Qwen2, "tiny");
  ASSERT_TRUE(apply_dims(spec.cfg, kDims).ok());
  spec.control_tokens = {"<|draft_only|>"};
  const std::string other = testing::TempDir() + "kamera-draft-other-vocab.gguf";
  ASSERT_TRUE(write_synthetic_gguf(spec, other).ok());
  d = DraftModel::load(other, *target, {});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("is \"<|draft_only|>\""), std::string::npos) << d.message();
}
