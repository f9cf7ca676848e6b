// The evaluation suite on tiny synthetic models of every family: in-context recompute against
// re-prefill, every baseline at its 0% and 100% budgets, byte accounting against the pool rows
// actually written, attention mass and the item generators.
#include <gtest/gtest.h>

#include "eval/baselines.h"
#include "eval/items.h"
#include "eval/metrics.h"
#include "eval/recompute.h"
#include "eval/suite.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

// Families: GQA (llama), GQA + biases (qwen2), M-RoPE (qwen2vl), MLA (deepseek2).
class EvalArch : public testing::TestWithParam<std::string> {};

std::vector<ReuseItem> items_for(const Model& m, int n, uint64_t seed) {
  if (m.cfg.rope.mrope != MropeMode::None) {
    FrameItemSpec fs;
    fs.n_items = n;
    fs.grid_h = 3;
    fs.grid_w = 5;
    fs.seed = seed;
    return frame_items(m, fs);
  }
  TokenItemSpec ts;
  ts.n_items = n;
  ts.antecedent_tokens = 12;
  ts.chunk_tokens = 14;
  ts.query_tokens = 4;
  ts.seed = seed;
  return random_token_items(m, ts);
}

const ArmSummary* find(const ReuseBenchResult& r, const std::string& name,
                       const std::string& param = "") {
  for (const auto& a : r.arms)
    if (a.name == name && a.param == param) return &a;
  return nullptr;
}

}  // namespace

// Recomputing every token of B from layer 0, in context, is a re-prefill of B: same pool rows and
// the same query logits (token chunks, embedding chunks, MHA/GQA and MLA).
TEST_P(EvalArch, RecomputeAllOfChunkEqualsReprefill) {
  auto ctx = tiny::context(tiny::model_path(GetParam()), 8000);
  ASSERT_TRUE(ctx);
  const Model* m = &ctx->model();
  KvPool* pool = &ctx->pool();
  Engine& engine = ctx->engine();
  ChunkCache& cc = ctx->cache();
  for (const ReuseItem& it : items_for(*m, 2, 3)) {
    const int32_t pA = cc.anchor_extent(), pB = pA + it.antecedent.extent(),
                  pQ = pB + it.chunk.extent();
    const int nA = it.antecedent.n(), nB = it.chunk.n();
    ScopedSequence ref(*pool), got(*pool);
    for (SeqId s : {ref.id(), got.id()}) {
      ASSERT_TRUE(cc.append_anchor(s).ok());
      ASSERT_TRUE(cc.forward_chunk(s, it.antecedent, pA).ok());
    }
    ASSERT_TRUE(cc.forward_chunk(ref.id(), it.chunk, pB).ok());
    auto canon = cc.canonical(it.chunk);
    ASSERT_TRUE(canon.ok()) << canon.message();
    ASSERT_TRUE(cc.append_chunk(got.id(), **canon, nullptr, pB).ok());
    RecomputePlan plan;
    for (int i = 0; i < nB; ++i) plan.tokens.push_back(1 + nA + i);
    std::vector<float> rows;
    if (it.chunk.is_tokens()) {
      plan.ids = it.chunk.tokens;
    } else {
      plan.hidden = it.chunk.embeddings.data();
    }
    RecomputeStats st;
    ASSERT_TRUE(recompute_tokens(engine, *pool, got.id(), plan, &st).ok());
    EXPECT_EQ(st.token_layers, int64_t(nB) * m->cfg.n_layers);
    const ChunkKV a = read_chunk_kv(*pool, ref.id(), 1 + nA, nB);
    const ChunkKV b = read_chunk_kv(*pool, got.id(), 1 + nA, nB);
    double err = 0, scale = 0;
    std::vector<float> x, y;
    for (size_t blk = 0; blk < a.blocks.size(); ++blk) {
      x.resize(a.blocks[blk].cols());
      y.resize(x.size());
      for (int i = 0; i < nB; ++i) {
        a.blocks[blk].get_row(i, x.data());
        b.blocks[blk].get_row(i, y.data());
        for (size_t j = 0; j < x.size(); ++j) {
          err = std::max(err, double(std::fabs(x[j] - y[j])));
          scale = std::max(scale, double(std::fabs(x[j])));
        }
      }
    }
    EXPECT_LT(err, 1e-5 * std::max(1.0, scale)) << GetParam();
    auto lr = cc.forward_chunk(ref.id(), it.query, pQ, LogitsMode::All);
    auto lg = cc.forward_chunk(got.id(), it.query, pQ, LogitsMode::All);
    ASSERT_TRUE(lr.ok() && lg.ok());
    EXPECT_LT(mean_kl_rows(*lr, *lg, m->cfg.n_vocab), 1e-9) << GetParam();
  }
}

// BASELINES.md's sanity properties: at a 100% budget every baseline is re-prefill, at 0% it is
// blind reuse (item by item).
TEST_P(EvalArch, EveryBaselineSpansBlindToReprefill) {
  auto ctx = tiny::context(tiny::model_path(GetParam()), 8000);
  ASSERT_TRUE(ctx);
  const Model* m = &ctx->model();
  const auto items = items_for(*m, 3, 5);
  ReuseBenchOptions full;
  full.ranks = {kFullRank};
  full.deep_half = false;
  full.baselines = true;
  full.cacheblend_share = {1.0};
  full.epic_k = {1000};
  full.sink_k = 1000;
  full.vlcache_share = 1.0;
  full.delta_token_share = {1.0};
  full.matched_ranks = {};
  auto r = run_reuse_bench(*ctx, items, full);
  ASSERT_TRUE(r.ok()) << r.message();
  const ArmSummary* blind = find(*r, "blind");
  ASSERT_TRUE(blind);
  ASSERT_GT(blind->kl, 1e-6) << "blind reuse should differ from re-prefill on these items";
  for (const auto& [name, param] :
       std::vector<std::pair<std::string, std::string>>{{"cacheblend", "p=1"},
                                                        {"epic", "k=1000"},
                                                        {"sink", "k=1000"},
                                                        {"vlcache", "share=1"},
                                                        {"oracle_delta_tokens", "p=1"},
                                                        {"partial_reprefill", "l=0"}}) {
    const ArmSummary* a = find(*r, name, param);
    ASSERT_TRUE(a) << name << " " << param;
    EXPECT_LT(a->kl, 1e-9) << name << " " << param;
    EXPECT_NEAR(a->recompute_fraction, 1.0, 1e-12) << name;
  }
  ReuseBenchOptions zero = full;
  zero.cacheblend_share = {0.0};
  zero.cacheblend_select_layer = 0;  // nothing recomputed even at the ranking layer
  zero.epic_k = {0};
  zero.sink_k = 0;
  zero.vlcache_share = 0.0;
  zero.delta_token_share = {0.0};
  auto z = run_reuse_bench(*ctx, items, zero);
  ASSERT_TRUE(z.ok()) << z.message();
  const ArmSummary* zb = find(*z, "blind");
  for (const auto& [name, param] :
       std::vector<std::pair<std::string, std::string>>{{"cacheblend", "p=0"},
                                                        {"epic", "k=0"},
                                                        {"sink", "k=0"},
                                                        {"vlcache", "share=0"},
                                                        {"oracle_delta_tokens", "p=0"}}) {
    const ArmSummary* a = find(*z, name, param);
    ASSERT_TRUE(a) << name;
    ASSERT_EQ(a->item_kl.size(), zb->item_kl.size());
    for (size_t i = 0; i < a->item_kl.size(); ++i)
      EXPECT_EQ(a->item_kl[i], zb->item_kl[i]) << name << " item " << i;
    EXPECT_EQ(a->recompute_fraction, 0.0);
    EXPECT_EQ(a->extra_kv_bytes, 0.0);
  }
  // Partial re-prefill from the last layer rewrites only rows its own (canonical) hidden state
  // determines: blind, at the cost of one layer.
  const ArmSummary* last = find(*r, "partial_reprefill", fmt::format("l={}", m->cfg.n_layers - 1));
  ASSERT_TRUE(last);
  for (size_t i = 0; i < last->item_kl.size(); ++i)
    EXPECT_NEAR(last->item_kl[i], blind->item_kl[i], 1e-6 * std::max(1e-3, blind->item_kl[i]));
}

// The rows a recompute reports writing are exactly the pool rows that change: poison B's rows,
// recompute a plan, and count.
TEST_P(EvalArch, RecomputeByteAccountingMatchesRowsWritten) {
  auto ctx = tiny::context(tiny::model_path(GetParam()), 8000);
  ASSERT_TRUE(ctx);
  const Model* m = &ctx->model();
  KvPool* pool = &ctx->pool();
  Engine& engine = ctx->engine();
  TokenItemSpec ts;
  ts.n_items = 1;
  ts.antecedent_tokens = 10;
  ts.chunk_tokens = 12;
  ts.seed = 9;
  const ReuseItem it = random_token_items(*m, ts)[0];
  ChunkCache& cc = ctx->cache();
  ScopedSequence s(*pool);
  ASSERT_TRUE(cc.append_anchor(s.id()).ok());
  ASSERT_TRUE(cc.forward_chunk(s.id(), it.antecedent, 1).ok());
  ASSERT_TRUE(cc.forward_chunk(s.id(), it.chunk, 1 + 10).ok());
  const int first = 11, nB = 12, L = m->cfg.n_layers;
  const KvLayout& layout = pool->layout();
  const auto slots = pool->slots(s.id());
  constexpr float kPoison = 12345.0f;
  for (int l = 0; l < L; ++l)
    for (size_t ch = 0; ch < layout.channels.size(); ++ch) {
      const int w = layout.channels[ch].width;
      for (int i = 0; i < nB; ++i)
        std::fill_n(pool->arena(l, int(ch)) + size_t(slots[first + i]) * w, w, kPoison);
    }
  RecomputePlan plan;
  plan.tokens = {first + 1, first + 4, first + 5, first + 9};  // three of them kept at layer 1
  const std::vector<int32_t> ids = {it.chunk.tokens[1], it.chunk.tokens[4], it.chunk.tokens[5],
                                    it.chunk.tokens[9]};
  plan.ids = ids;
  plan.select_layer = 1;
  plan.keep = 3;
  RecomputeStats st;
  ASSERT_TRUE(recompute_tokens(engine, *pool, s.id(), plan, &st).ok());
  int64_t rows_changed = 0;
  for (int l = 0; l < L; ++l)
    for (int i = 0; i < nB; ++i) {
      bool changed = false;
      for (size_t ch = 0; ch < layout.channels.size(); ++ch) {
        const int w = layout.channels[ch].width;
        const float* row = pool->arena(l, int(ch)) + size_t(slots[first + i]) * w;
        bool all_poison = true;
        for (int j = 0; j < w; ++j) all_poison = all_poison && row[j] == kPoison;
        EXPECT_TRUE(ch == 0 || changed == !all_poison) << "channels of a row written together";
        changed = !all_poison;
      }
      rows_changed += changed;
    }
  EXPECT_EQ(st.rows_written, rows_changed);
  EXPECT_EQ(st.rows_written, 4 + int64_t(3) * (L - 1));  // all four at layer 0, three above
  EXPECT_GT(st.flops, 0.0);
}

// Every query's attention weights sum to one per head and layer: the mass the oracle selector
// reads adds up to queries x heads x layers.
TEST_P(EvalArch, KeyMassIsAProbabilityPerQueryHeadAndLayer) {
  auto ctx = tiny::context(tiny::model_path(GetParam()), 8000);
  ASSERT_TRUE(ctx);
  const Model* m = &ctx->model();
  KvPool* pool = &ctx->pool();
  Engine& engine = ctx->engine();
  ScopedSequence s(*pool);
  std::vector<int32_t> ids = {1, 5, 9, 14, 20, 7, 3, 11, 30, 2};
  const auto pos = tiny::linear_positions(int(ids.size()));
  ASSERT_TRUE(engine.forward(*pool, s.id(), ForwardInput::from_tokens(ids, pos)).ok());
  KeyMassSum observer;
  ForwardOptions fo;
  fo.observer = &observer;
  std::vector<int32_t> q = {4, 8, 12};
  const auto qpos = tiny::linear_positions(3, int(ids.size()));
  ASSERT_TRUE(engine.forward(*pool, s.id(), ForwardInput::from_tokens(q, qpos), fo).ok());
  double total = 0;
  for (float x : observer.mass) total += x;
  EXPECT_NEAR(total, 3.0 * m->cfg.n_heads * m->cfg.n_layers, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Families, EvalArch,
                         testing::Values("llama", "qwen2", "qwen2vl", "deepseek2"));

// The reported bytes of the patch and recompute arms are the bytes of the buffers they fill.
TEST(EvalSuite, ArmCostsAreTheBuffersTouched) {
  auto ctx = tiny::context(tiny::model_path("llama"), 8000);
  ASSERT_TRUE(ctx);
  const Model* m = &ctx->model();
  auto items = items_for(*m, 2, 11);
  ReuseBenchOptions o;
  o.ranks = {2};
  o.deep_half = false;
  o.baselines = true;
  o.cacheblend_share = {};
  o.epic_k = {3};
  o.delta_token_share = {};
  o.matched_ranks = {};
  auto r = run_reuse_bench(*ctx, items, o);
  ASSERT_TRUE(r.ok()) << r.message();
  const KvLayout layout = m->kv_layout();
  double row_bytes = 0;
  for (const auto& ch : layout.channels) row_bytes += 4.0 * ch.width;
  const ArmSummary* epic = find(*r, "epic", "k=3");
  ASSERT_TRUE(epic);
  EXPECT_DOUBLE_EQ(epic->extra_kv_bytes, 3 * m->cfg.n_layers * row_bytes);
  // rank-2 patch: U (n x 2) and V^T (2 x width) per layer and channel, f32
  const double n = items[0].chunk.n();
  double patch = 0;
  for (const auto& ch : layout.channels) patch += 4.0 * 2 * (n + ch.width) * m->cfg.n_layers;
  EXPECT_DOUBLE_EQ(find(*r, "patch")->extra_kv_bytes, patch);  // both items have the same n
  EXPECT_NEAR(find(*r, "patch")->patch_bytes_fraction, patch / (n * row_bytes * m->cfg.n_layers),
              1e-12);
}

TEST(EvalItems, FramesAreSeededGridsAtTokenScale) {
  auto ctx = tiny::context(tiny::model_path("qwen2vl"), 8000);
  ASSERT_TRUE(ctx);
  const Model* m = &ctx->model();
  FrameItemSpec fs;
  fs.n_items = 2;
  const auto a = frame_items(*m, fs), b = frame_items(*m, fs);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].chunk.embeddings, b[0].chunk.embeddings) << "seeded";
  EXPECT_NE(a[0].chunk.embeddings, a[1].chunk.embeddings);
  EXPECT_EQ(a[0].chunk.n(), fs.grid_h * fs.grid_w);
  EXPECT_EQ(a[0].chunk.extent(), std::max(fs.grid_h, fs.grid_w));
  EXPECT_EQ(a[0].chunk.layout[fs.grid_w + 2], (Pos{0, 1, 2}));
  EXPECT_TRUE(a[0].chunk.validate(m->cfg.n_vocab, m->cfg.dim).ok());
  // consecutive frames of a clip are correlated, different clips are not
  auto cosine = [&](const std::vector<float>& x, const std::vector<float>& y) {
    double s = 0, nx = 0, ny = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      s += double(x[i]) * y[i];
      nx += double(x[i]) * x[i];
      ny += double(y[i]) * y[i];
    }
    return s / std::sqrt(nx * ny);
  };
  EXPECT_GT(cosine(a[0].antecedent.embeddings, a[0].chunk.embeddings), 0.5);
  EXPECT_LT(std::fabs(cosine(a[0].chunk.embeddings, a[1].chunk.embeddings)), 0.3);
}
