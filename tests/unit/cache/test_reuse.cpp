// The position-free chunk cache on synthetic models: chunk identity, canonical formation,
// relocation exactness, patch formation/application, serving, the store, bad input.
#include <gtest/gtest.h>

#include <random>

#include "cache/chunk_cache.h"
#include "eval/metrics.h"
#include "reuse/relocate.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

using tiny::random_chunk;

struct Rig : tiny::ContextRig {
  explicit Rig(const std::string& arch, size_t budget = size_t(1) << 30)
      : ContextRig(arch, 4000, 16, budget) {}
  // Logits of every query position after [anchor][chunks], served with `opts`.
  std::vector<float> query_logits(const std::vector<ChunkContent>& chunks, const ChunkContent& q,
                                  const ServeOptions& opts, ServeReport* rep = nullptr) {
    ScopedSequence s(*pool);
    auto r = cache->assemble(s.id(), chunks, opts);
    EXPECT_TRUE(r.ok()) << r.message();
    if (rep) *rep = *r;
    auto l = cache->forward_chunk(s.id(), q, r->next_position, LogitsMode::All);
    EXPECT_TRUE(l.ok()) << l.message();
    return *l;
  }
};

ServeOptions policy(ServePolicy p, int rank = kFullRank) {
  ServeOptions o;
  o.policy = p;
  o.patch.rank = rank;
  return o;
}

class ReuseArch : public testing::TestWithParam<std::string> {};

}  // namespace

TEST(ChunkId, ContentAddressedNotPositionAddressed) {
  const std::array<uint64_t, 2> fp = {1, 2}, fp2 = {1, 3};
  auto a = ChunkContent::from_tokens({5, 6, 7});
  auto b = ChunkContent::from_tokens({5, 6, 8});
  EXPECT_EQ(chunk_id(fp, a), chunk_id(fp, ChunkContent::from_tokens({5, 6, 7})));
  EXPECT_NE(chunk_id(fp, a), chunk_id(fp, b));
  EXPECT_NE(chunk_id(fp, a), chunk_id(fp2, a));  // another model: another chunk
  EXPECT_EQ(a.positions_at(40)[2], Pos::linear(42));
  EXPECT_EQ(a.extent(), 3);
  const ChunkId id = chunk_id(fp, a);
  EXPECT_EQ(ChunkId::from_hex(id.hex()), id);
  EXPECT_FALSE(ChunkId::from_hex("xyz").has_value());
}

// The canonical is KV(B | anchor) with the rope channel pre-rotation; relocating it to p equals
// what a prefill of [anchor · B] shifted to p attends with, within f32 rounding; in the first
// layer (keys depend on the tokens only) bit for bit.
TEST_P(ReuseArch, RelocationOfCanonicalMatchesShiftedPrefill) {
  Rig rig(GetParam());
  const auto& c = rig.model->cfg;
  auto B = random_chunk(24, c.n_vocab, 1);
  auto canon = rig.cache->canonical(B);
  ASSERT_TRUE(canon.ok()) << canon.message();
  for (int32_t p : {1, 57, 700}) {
    ScopedSequence s(*rig.pool);
    ASSERT_TRUE(rig.cache->forward_chunk(s.id(), ChunkContent::from_tokens({1}), p - 1).ok());
    ASSERT_TRUE(rig.cache->forward_chunk(s.id(), B, p).ok());
    const ChunkKV shifted = read_chunk_kv(*rig.pool, s.id(), 1, B.n());
    // the rope channel: k (GQA, n_kv heads) or k_pe (MLA, one head)
    const KvLayout& lay = rig.pool->layout();
    int rc = 0;
    for (int ch = 0; ch < int(lay.channels.size()); ++ch)
      if (lay.channels[ch].rotated) rc = ch;
    const int w = lay.channels[rc].width, heads = w / rig.engine->rope().desc().head_dim;
    const auto pos = B.positions_at(p);
    for (int layer = 0; layer < c.n_layers; ++layer) {
      std::vector<float> x(size_t(B.n()) * w), y(x.size());
      for (int i = 0; i < B.n(); ++i) {
        (*canon)->kv.at(layer, rc).get_row(i, &x[size_t(i) * w]);
        shifted.at(layer, rc).get_row(i, &y[size_t(i) * w]);
      }
      relocate_rope_channel(rig.engine->rope(), heads, x.data(), B.n(), w, pos);
      relocate_rope_channel(rig.engine->rope(), heads, y.data(), B.n(), w, pos);
      double err = 0, scale = 0;
      int64_t ulp = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        err = std::max(err, double(std::fabs(x[i] - y[i])));
        scale = std::max(scale, double(std::fabs(y[i])));
        ulp = std::max(ulp, ulp_distance(x[i], y[i]));
      }
      if (layer == 0) {
        EXPECT_EQ(ulp, 0) << "p " << p;
      }
      EXPECT_LT(err / scale, 2e-6) << "layer " << layer << " p " << p;
    }
  }
}

// Full-rank patch reconstructs KV(B|A) within 1e-5 relative; next-token KL <= 1e-6; the
// reconstruction error does not grow with rank.
TEST_P(ReuseArch, FullRankPatchRebuildsConditionedKv) {
  Rig rig(GetParam());
  const auto& c = rig.model->cfg;
  auto A = random_chunk(30, c.n_vocab, 2), B = random_chunk(40, c.n_vocab, 3);
  auto Q = random_chunk(6, c.n_vocab, 4);
  auto canon = rig.cache->canonical(B);
  ASSERT_TRUE(canon.ok());
  const std::vector<ChunkContent> ab = {A, B};
  auto cond = rig.cache->conditioned(ab);
  ASSERT_TRUE(cond.ok()) << cond.message();
  const ChunkKV& kv = (*cond)[1];
  double prev_err = INFINITY;
  for (int rank : {1, 2, 4, 8, 16, kFullRank}) {
    PatchOptions po;
    po.rank = rank;
    po.cap_rank = true;  // MLA's k_pe band is narrower than some ranks
    auto p = form_patch(kv, (*canon)->kv, po);
    ASSERT_TRUE(p.ok()) << p.message();
    ChunkKV rebuilt = (*canon)->kv;
    apply_patch(*p, rebuilt);
    double err = 0, scale = 0;  // Frobenius error over all layers and channels
    for (size_t b = 0; b < kv.blocks.size(); ++b) {
      std::vector<float> x(kv.blocks[b].cols()), y(x.size());
      for (int i = 0; i < kv.n_tokens; ++i) {
        rebuilt.blocks[b].get_row(i, x.data());
        kv.blocks[b].get_row(i, y.data());
        for (size_t j = 0; j < x.size(); ++j) {
          err += double(x[j] - y[j]) * (x[j] - y[j]);
          scale = std::max(scale, double(std::fabs(y[j])));
        }
      }
    }
    err = std::sqrt(err);
    EXPECT_LE(err, prev_err * (1 + 1e-6) + 1e-7) << "rank " << rank;
    prev_err = err;
    if (rank == kFullRank) {
      double max_rel = 0;
      for (size_t b = 0; b < kv.blocks.size(); ++b) {
        std::vector<float> x(kv.blocks[b].cols()), y(x.size());
        double num = 0, den = 0;
        for (int i = 0; i < kv.n_tokens; ++i) {
          rebuilt.blocks[b].get_row(i, x.data());
          kv.blocks[b].get_row(i, y.data());
          for (size_t j = 0; j < x.size(); ++j)
            num = std::max(num, double(std::fabs(x[j] - y[j]))),
            den = std::max(den, double(std::fabs(y[j])));
        }
        max_rel = std::max(max_rel, num / den);
      }
      EXPECT_LT(max_rel, 1e-5);
    }
  }
  // Served end to end: full-rank patch vs re-prefill, next-token KL at every query position.
  const std::vector<ChunkContent> chunks = {A, B};
  auto ref = rig.query_logits(chunks, Q, policy(ServePolicy::Reprefill));
  auto full = rig.query_logits(chunks, Q, policy(ServePolicy::Patch, kFullRank));
  auto blind = rig.query_logits(chunks, Q, policy(ServePolicy::Blind));
  const double kl_full = mean_kl_rows(ref, full, c.n_vocab);
  const double kl_blind = mean_kl_rows(ref, blind, c.n_vocab);
  EXPECT_LE(kl_full, 1e-6);
  EXPECT_GT(kl_blind, 100 * std::max(kl_full, 1e-12))
      << "the conditioning deficit should be visible";
}

// A chunk at the front has no antecedent: it is served from its canonical, and its rows equal
// those of a plain prefill bit for bit.
TEST_P(ReuseArch, LeadingChunkIsExactPrefixHit) {
  Rig rig(GetParam());
  auto A = random_chunk(33, rig.model->cfg.n_vocab, 5);
  ScopedSequence served(*rig.pool), prefilled(*rig.pool);
  const std::vector<ChunkContent> chunks = {A};
  auto rep = rig.cache->assemble(served.id(), chunks, policy(ServePolicy::Patch));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->segments[0].source, SegmentSource::Canonical);
  auto rep2 = rig.cache->assemble(prefilled.id(), chunks, policy(ServePolicy::Reprefill));
  ASSERT_TRUE(rep2.ok());
  const KvPool& pool = *rig.pool;
  for (int l = 0; l < rig.model->cfg.n_layers; ++l)
    for (int ch = 0; ch < 2; ++ch)
      for (int t = 0; t < pool.n_tokens(served.id()); ++t)
        ASSERT_EQ(0,
                  std::memcmp(pool.row(served.id(), l, ch, t), pool.row(prefilled.id(), l, ch, t),
                              sizeof(float) * pool.layout().channels[ch].width));
}

// Patches are formed once (one forward for all chunks of a request) and hit afterwards; every
// chunk's stored conditioning is keyed by its ordered antecedents.
TEST_P(ReuseArch, PatchFormedOnceThenServedWithZeroForwards) {
  Rig rig(GetParam());
  const int V = rig.model->cfg.n_vocab;
  const std::vector<ChunkContent> chunks = {random_chunk(20, V, 6), random_chunk(25, V, 7),
                                            random_chunk(15, V, 8)};
  auto Q = random_chunk(5, V, 9);
  ServeReport first, second, reordered;
  auto l1 = rig.query_logits(chunks, Q, policy(ServePolicy::Patch, 8), &first);
  EXPECT_EQ(first.segments[1].source, SegmentSource::PatchFormed);
  EXPECT_EQ(first.segments[2].source, SegmentSource::PatchFormed);
  auto l2 = rig.query_logits(chunks, Q, policy(ServePolicy::Patch, 8), &second);
  EXPECT_EQ(second.forwards, 0);
  EXPECT_EQ(second.tokens_computed, 0);
  EXPECT_EQ(second.segments[1].source, SegmentSource::PatchHit);
  EXPECT_EQ(l1, l2);  // same stored objects, same bytes, whatever pages the rows landed in
  // Another order is another antecedent signature: a miss, formed anew.
  const std::vector<ChunkContent> other = {chunks[1], chunks[0], chunks[2]};
  rig.query_logits(other, Q, policy(ServePolicy::Patch, 8), &reordered);
  EXPECT_EQ(reordered.segments[1].source, SegmentSource::PatchFormed);
  const auto st = rig.store->stats();
  EXPECT_EQ(st.canonical_entries, 3);
  EXPECT_GE(st.patch_hits, 2);
  EXPECT_GT(st.bytes_saved, 0u);
}

// Evicting entries (a tiny budget) never changes a sequence already served: the pool owns its
// rows. And serving again after eviction re-forms what is needed and gives the same logits.
TEST_P(ReuseArch, StoreEvictionNeverCorruptsServedSequences) {
  Rig rig(GetParam());
  const int V = rig.model->cfg.n_vocab;
  const std::vector<ChunkContent> chunks = {random_chunk(20, V, 10), random_chunk(22, V, 11)};
  auto Q = random_chunk(4, V, 12);
  ScopedSequence s(*rig.pool);
  auto rep = rig.cache->assemble(s.id(), chunks, policy(ServePolicy::Patch, 4));
  ASSERT_TRUE(rep.ok());
  const int n = rig.pool->n_tokens(s.id());
  std::vector<float> before;
  for (int t = 0; t < n; ++t)
    for (int l = 0; l < rig.model->cfg.n_layers; ++l) {
      const float* r = static_cast<const KvPool&>(*rig.pool).row(s.id(), l, 1, t);
      before.insert(before.end(), r, r + rig.pool->layout().channels[1].width);
    }
  rig.store->set_budget(1);  // evicts everything
  EXPECT_EQ(rig.store->stats().bytes_held(), 0u);
  EXPECT_GT(rig.store->stats().canonical_evictions + rig.store->stats().patch_evictions, 0);
  std::vector<float> after;
  for (int t = 0; t < n; ++t)
    for (int l = 0; l < rig.model->cfg.n_layers; ++l) {
      const float* r = static_cast<const KvPool&>(*rig.pool).row(s.id(), l, 1, t);
      after.insert(after.end(), r, r + rig.pool->layout().channels[1].width);
    }
  EXPECT_EQ(before, after);
  auto q1 = rig.cache->forward_chunk(s.id(), Q, rep->next_position, LogitsMode::Last);
  ASSERT_TRUE(q1.ok());
  rig.store->set_budget(size_t(1) << 30);
  auto q2 = rig.query_logits(chunks, Q, policy(ServePolicy::Patch, 4));
  EXPECT_LE(tiny::max_abs_diff(*q1, {q2.end() - V, q2.end()}), tiny::rounding_bound(*q1));
}

TEST_P(ReuseArch, BadInputGivesClearErrorsAndLeavesNothingBehind) {
  Rig rig(GetParam());
  const auto& c = rig.model->cfg;
  ScopedSequence s(*rig.pool);
  const ChunkId unknown{0x1234, 0x5678};
  auto r1 = rig.cache->assemble_ids(s.id(), {&unknown, 1}, policy(ServePolicy::Blind));
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.message().find("unknown chunk id"), std::string::npos) << r1.message();
  // rank above min(tokens, width)
  const std::vector<ChunkContent> chunks = {random_chunk(10, c.n_vocab, 13),
                                            random_chunk(12, c.n_vocab, 14)};
  auto r2 = rig.cache->assemble(s.id(), chunks, policy(ServePolicy::Patch, 10000));
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.message().find("exceeds"), std::string::npos) << r2.message();
  EXPECT_EQ(rig.pool->n_tokens(s.id()), 0);  // nothing half-written
  // positions past the model's context
  const std::vector<ChunkContent> too_long = {random_chunk(c.ctx_len, c.n_vocab, 15)};
  auto r3 = rig.cache->assemble(s.id(), too_long, policy(ServePolicy::Blind));
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.message().find("context length"), std::string::npos) << r3.message();
  auto canon = rig.cache->canonical(chunks[0]);
  ASSERT_TRUE(canon.ok());
  EXPECT_FALSE(rig.cache->append_chunk(s.id(), **canon, nullptr, c.ctx_len - 2).ok());
  // bad token ids
  auto bad = ChunkContent::from_tokens({1, c.n_vocab + 3});
  EXPECT_FALSE(rig.cache->canonical(bad).ok());
  EXPECT_EQ(rig.pool->n_tokens(s.id()), 0);
  EXPECT_TRUE(rig.pool->check_invariants().ok());
}

// The same reuse suite on every attention family: MHA/GQA (llama, qwen2), M-RoPE (qwen2vl),
// MLA (deepseek2), MLA with MoE FFNs and YaRN (deepseek2:tiny-moe), MLA with Kimi-VL's
// DeepSeek-V3 routing (deepseek2:kimi-vl-tiny: only k_pe rotates, c_kv never changes), GQA with
// per-head q/k norms before the rope (qwen3; qwen3moe with its softmax top-k experts; qwen3vl and
// qwen3vlmoe with interleaved M-RoPE: their image chunks in tests/unit/vision/test_vl_chunks.cpp).
// The family appears only in the model's channel layout and forward.
INSTANTIATE_TEST_SUITE_P(Families, ReuseArch,
                         testing::Values("llama", "qwen2", "qwen2vl", "deepseek2",
                                         "deepseek2:tiny-moe", "deepseek2:kimi-vl-tiny", "qwen3",
                                         "qwen3moe", "qwen3vl", "qwen3vlmoe", "smollm3", "gemma3",
                                         "phi3", "gpt-oss"));

TEST(Patch, RandomizedSvdMatchesGesddOnLowRankData) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  const int rows = 600, cols = 300, true_rank = 12;
  std::vector<float> u(size_t(rows) * true_rank), v(size_t(true_rank) * cols),
      a(size_t(rows) * cols, 0.f);
  for (auto& x : u) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  for (int i = 0; i < rows; ++i)
    for (int k = 0; k < true_rank; ++k)
      for (int j = 0; j < cols; ++j)
        a[size_t(i) * cols + j] += u[size_t(i) * true_rank + k] * v[size_t(k) * cols + j];
  for (auto& x : a) x += 1e-3f * nd(rng);  // a little noise
  for (SvdMethod m : {SvdMethod::Gesdd, SvdMethod::Randomized}) {
    std::vector<float> us, vt;
    ASSERT_TRUE(truncated_svd(a.data(), rows, cols, true_rank, m, us, vt).ok());
    double err = 0, norm = 0;
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        double s = 0;
        for (int k = 0; k < true_rank; ++k)
          s += double(us[size_t(i) * true_rank + k]) * vt[size_t(k) * cols + j];
        err += (s - a[size_t(i) * cols + j]) * (s - a[size_t(i) * cols + j]);
        norm += double(a[size_t(i) * cols + j]) * a[size_t(i) * cols + j];
      }
    EXPECT_LT(std::sqrt(err / norm), 1e-3) << (m == SvdMethod::Gesdd ? "gesdd" : "randomized");
  }
}

TEST(Patch, LayerSetsAndBf16Factors) {
  auto ls = LayerSet::parse("deep-half");
  ASSERT_TRUE(ls.ok());
  EXPECT_EQ(ls->resolve(5), (std::vector<int>{2, 3, 4}));
  auto list = LayerSet::parse("3,0,3,9");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->resolve(5), (std::vector<int>{0, 3}));
  EXPECT_FALSE(LayerSet::parse("1,x").ok());
  Rig rig("llama");
  const int V = rig.model->cfg.n_vocab;
  auto A = random_chunk(20, V, 16), B = random_chunk(20, V, 17);
  auto canon = rig.cache->canonical(B);
  const std::vector<ChunkContent> ab = {A, B};
  auto cond = rig.cache->conditioned(ab);
  PatchOptions f32, b16, deep, per_head;
  f32.rank = b16.rank = deep.rank = 8;
  b16.dtype = DType::BF16;
  deep.layers = *ls;
  per_head.rank = 4;
  per_head.per_head = true;
  per_head.head_dim = rig.model->cfg.head_dim;
  auto p32 = form_patch((*cond)[1], (*canon)->kv, f32);
  auto p16 = form_patch((*cond)[1], (*canon)->kv, b16);
  auto pd = form_patch((*cond)[1], (*canon)->kv, deep);
  auto ph = form_patch((*cond)[1], (*canon)->kv, per_head);
  ASSERT_TRUE(p32.ok() && p16.ok() && pd.ok() && ph.ok());
  EXPECT_EQ(p16->bytes() * 2, p32->bytes());
  EXPECT_EQ(pd->factors.size(), size_t(2 * 1));  // tiny has 2 layers: the deeper one, 2 channels
  EXPECT_EQ(ph->factors.size(), size_t(2 * 2 * rig.model->cfg.n_kv_heads));
  for (const auto& f : pd->factors) EXPECT_EQ(f.layer, 1);
}

TEST(Store, LruEvictionAndStats) {
  ChunkStore store(2000);
  auto mk = [](uint64_t i, int n) {
    auto e = std::make_shared<CanonicalEntry>();
    e->id = {i, i};
    e->content = ChunkContent::from_tokens(std::vector<int32_t>(n, 1));
    KvLayout l;
    l.n_layers = 1;
    l.channels = {{"k", 4, true}};
    e->kv = ChunkKV(l, n, DType::F32);
    return e;
  };
  store.put_canonical(mk(1, 20));
  store.put_canonical(mk(2, 20));
  EXPECT_TRUE(store.find_canonical({1, 1}));  // 1 is now more recent than 2
  store.put_canonical(mk(3, 20));             // over budget: evicts the LRU entry, 2
  EXPECT_FALSE(store.contains_canonical({2, 2}));
  EXPECT_TRUE(store.contains_canonical({1, 1}));
  EXPECT_TRUE(store.contains_canonical({3, 3}));
  EXPECT_FALSE(store.find_canonical({9, 9}));
  const auto st = store.stats();
  EXPECT_EQ(st.canonical_hits, 1);
  EXPECT_EQ(st.canonical_misses, 1);
  EXPECT_EQ(st.canonical_evictions, 1);
  EXPECT_LE(st.bytes_held(), 2000u);
  store.put_canonical(mk(4, 100000));  // larger than the budget: not kept
  EXPECT_FALSE(store.contains_canonical({4, 4}));
}
