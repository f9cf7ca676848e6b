// A Kimi-VL picture as a chunk of the reuse layer: the tiny MoonViT tower's rows (linear
// positions) beside the tiny kimi-vl decoder (MLA, DeepSeek-V3 routing). Its canonical placed
// anywhere equals a fresh prefill there (only k_pe is re-rotated; c_kv is the same bytes), and the
// full-rank patch of its deficit rebuilds the KV the picture has after a text antecedent.
#include <gtest/gtest.h>

#include <cmath>

#include "cache/chunk_cache.h"
#include "media/image.h"
#include "reuse/patch.h"
#include "support/tiny_models.h"
#include "vision/kimi_vision_encoder.h"

using namespace kamera;

namespace {

ChunkContent picture_chunk() {
  const KimiVisionModel tower = KimiVisionModel::random(*kimi_vision_preset("tiny"), 4);
  auto img = load_image(std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_vision/img_140x112.png");
  EXPECT_TRUE(img.ok());
  auto p = kimi_preprocess_image(*img, tower.cfg);
  EXPECT_TRUE(p.ok());
  auto e = KimiVisionEncoder(tower, nullptr).encode(*p);
  EXPECT_TRUE(e.ok());
  ChunkContent c;
  c.dim = e->dim;
  c.embeddings = std::move(e->rows);
  for (int i = 0; i < c.n(); ++i) c.layout.push_back(Pos::linear(i));
  return c;
}

}  // namespace

TEST(KimiVlChunks, PictureRelocatesExactlyAndItsFullRankPatchIsTheConditionedKv) {
  auto ctx = tiny::context(tiny::model_path("deepseek2:kimi-vl-tiny"), 600, 16, size_t(1) << 28, 2);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  KvPool* pool = &ctx->pool();
  ChunkCache& cc = ctx->cache();
  const ChunkContent img = picture_chunk();
  ASSERT_EQ(img.n(), 20);  // 140 x 112: 10 x 8 patches, 5 x 4 merged tokens
  ASSERT_EQ(img.dim, m.cfg.dim);
  const auto q = ChunkContent::from_tokens(tiny::random_tokens(4, m.cfg.n_vocab, 6));
  auto canon = cc.canonical(img);
  ASSERT_TRUE(canon.ok()) << canon.message();
  for (int32_t delta : {0, 9, 300}) {
    ScopedSequence a(*pool);  // served: the canonical placed at 1 + delta
    ASSERT_TRUE(cc.forward_chunk(a.id(), ChunkContent::from_tokens({1}), delta).ok());
    ASSERT_TRUE(cc.append_chunk(a.id(), **canon, nullptr, 1 + delta).ok());
    auto got = cc.forward_chunk(a.id(), q, 1 + delta + img.extent(), LogitsMode::All);
    ScopedSequence b(*pool);  // a fresh prefill of the same at the shifted positions
    ASSERT_TRUE(cc.forward_chunk(b.id(), ChunkContent::from_tokens({1}), delta).ok());
    ASSERT_TRUE(cc.forward_chunk(b.id(), img, 1 + delta).ok());
    auto want = cc.forward_chunk(b.id(), q, 1 + delta + img.extent(), LogitsMode::All);
    ASSERT_TRUE(got.ok() && want.ok());
    EXPECT_LT(tiny::max_abs_diff(*got, *want), 2e-5) << "delta " << delta;
  }
  // after a text antecedent: the full-rank patch over (c_kv, k_pe) rebuilds the conditioned KV
  const auto A = ChunkContent::from_tokens(tiny::random_tokens(30, m.cfg.n_vocab, 2));
  const std::vector<ChunkContent> ab = {A, img};
  auto cond = cc.conditioned(ab);
  ASSERT_TRUE(cond.ok()) << cond.message();
  const ChunkKV& kv = (*cond)[1];
  PatchOptions po;
  po.rank = kFullRank;
  po.cap_rank = true;
  auto p = form_patch(kv, (*canon)->kv, po);
  ASSERT_TRUE(p.ok()) << p.message();
  ChunkKV rebuilt = (*canon)->kv;
  apply_patch(*p, rebuilt);
  double num = 0, den = 0, deficit = 0;
  for (size_t blk = 0; blk < kv.blocks.size(); ++blk) {
    std::vector<float> x(kv.blocks[blk].cols()), y(x.size()), z(x.size());
    for (int i = 0; i < kv.n_tokens; ++i) {
      rebuilt.blocks[blk].get_row(i, x.data());
      kv.blocks[blk].get_row(i, y.data());
      (*canon)->kv.blocks[blk].get_row(i, z.data());
      for (size_t j = 0; j < x.size(); ++j) {
        num = std::max(num, double(std::fabs(x[j] - y[j])));
        den = std::max(den, double(std::fabs(y[j])));
        deficit = std::max(deficit, double(std::fabs(z[j] - y[j])));
      }
    }
  }
  EXPECT_LT(num / den, 1e-5);
  EXPECT_GT(deficit / den, 1e-2);  // the antecedent does change the picture's KV
}
