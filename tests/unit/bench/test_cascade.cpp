// The recall cascade on a tiny random model: the staleness signals (zero when nothing in front of a
// slot changed, positive when it did), and the refresh policies' ends (always refreshing at full
// rank reproduces the re-prefill).
#include <gtest/gtest.h>

#include "bench/cascade_bench.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

struct Rig : tiny::ContextRig {
  Rig() : ContextRig("qwen2", 12000, 8) {}
  ChunkContent chunk(int n, uint32_t seed) {
    return tiny::random_chunk(n, model->cfg.n_vocab, seed);
  }
  std::unique_ptr<Window> window() {
    WindowPolicy p;
    p.rank = kFullRank;
    auto w = Window::create(*ctx, p);
    EXPECT_TRUE(w.ok()) << w.message();
    return std::move(w.value());
  }
};

}  // namespace

// Slots whose antecedents are unchanged probe to (numerically) zero at full rank and have a zero
// change share; after a recall at the front every dependent is stale and probes positive.
TEST(Cascade, SignalsAreZeroWithoutChangeAndPositiveAfterARecall) {
  Rig r;
  auto w = r.window();
  for (uint32_t s = 1; s <= 4; ++s) ASSERT_TRUE(w->admit_back(r.chunk(7, s)).ok());
  ASSERT_TRUE(w->stale_slots().empty());
  for (int i = 0; i < 4; ++i) {
    auto p = probe_staleness(*r.ctx, *w, i, 2);
    ASSERT_TRUE(p.ok()) << p.message();
    EXPECT_LT(*p, 1e-4) << "slot " << i;
    EXPECT_EQ(antecedent_change_share(*r.store, *w, i), 0.0);
  }
  const ChunkId head = w->slots()[0].id;
  ASSERT_TRUE(w->evict_front().ok());
  ASSERT_TRUE(w->recall(head, 0, RecallMode::Fresh).ok());  // back where it was: nothing changed
  EXPECT_TRUE(w->stale_slots().empty());
  const ChunkId mid = w->slots()[2].id;
  ASSERT_TRUE(w->evict(2).ok());
  ASSERT_TRUE(w->recall(mid, 0, RecallMode::Fresh).ok());  // moved to the front
  const auto stale = w->stale_slots();
  ASSERT_EQ(stale.size(), 3u);
  for (int s : stale) {
    auto p = probe_staleness(*r.ctx, *w, s, 2);
    ASSERT_TRUE(p.ok()) << p.message();
    EXPECT_GT(*p, 1e-3) << "slot " << s;
  }
  // The share signal sees the set: slots 1 and 2 gained the recalled chunk in front of them
  // (7 of 7 and 7 of 14 tokens); slot 3 sees the same set reordered and is blind to it.
  EXPECT_DOUBLE_EQ(antecedent_change_share(*r.store, *w, 1), 1.0);
  EXPECT_DOUBLE_EQ(antecedent_change_share(*r.store, *w, 2), 0.5);
  EXPECT_EQ(antecedent_change_share(*r.store, *w, 3), 0.0);
}

// At full rank, refreshing every stale dependent is a re-prefill (KL ~ 0) and never refreshing is
// not; thresholds at 0 refresh every dependent, so they match always; random at matched counts
// refreshes as many as the probe policy.
TEST(Cascade, AlwaysRefreshEqualsReprefillAtFullRank) {
  Rig r;
  std::vector<ChunkContent> chunks, queries;
  for (uint32_t s = 0; s < 7; ++s) chunks.push_back(r.chunk(6, 100 + s));
  for (uint32_t s = 0; s < 3; ++s) queries.push_back(r.chunk(3, 200 + s));
  CascadeOptions o;
  o.steps = 6;
  o.window_chunks = 3;
  o.rank = kFullRank;
  o.probe_thresholds = {0.0, 1e9};
  o.share_thresholds = {0.0};
  auto res = run_cascade(*r.ctx, chunks, queries, o);
  ASSERT_TRUE(res.ok()) << res.message();
  const std::vector<CascadeRow> rows = res->rows;
  ASSERT_EQ(rows.size(), 9u);  // never, always, probe/random x2, share, inplace, inplace-share
  EXPECT_EQ(rows[0].policy, "never");
  EXPECT_EQ(rows[1].policy, "always");
  EXPECT_LT(rows[1].kl, 1e-4);
  EXPECT_GT(rows[0].kl, 1e-3);
  EXPECT_EQ(rows[0].refreshes_per_question, 0.0);
  EXPECT_GT(rows[1].refreshes_per_question, 0.0);
  EXPECT_DOUBLE_EQ(rows[1].refreshes_per_question, rows[1].stale_per_question);
  EXPECT_NEAR(rows[1].eta, 1.0, 1e-3);
  // probe > 0 refreshes every stale dependent (each has a positive probe).
  EXPECT_EQ(rows[2].policy, "probe");
  EXPECT_DOUBLE_EQ(rows[2].refreshes_per_question, rows[1].refreshes_per_question);
  EXPECT_LT(rows[2].kl, 1e-4);
  EXPECT_GT(rows[2].forward_tokens_per_question, rows[1].forward_tokens_per_question);
  EXPECT_EQ(rows[3].policy, "random");
  EXPECT_DOUBLE_EQ(rows[3].refreshes_per_question, rows[2].refreshes_per_question);
  // probe > 1e9 refreshes nothing: never's KL, plus the probe tokens.
  EXPECT_EQ(rows[4].refreshes_per_question, 0.0);
  EXPECT_DOUBLE_EQ(rows[4].kl, rows[0].kl);
  EXPECT_GT(rows[4].forward_tokens_per_question, 0.0);
  EXPECT_EQ(rows[6].policy, "share");
  // share > 0 skips only reorder-only dependents: fewer refreshes, less KL than never.
  EXPECT_LE(rows[6].refreshes_per_question, rows[1].refreshes_per_question);
  EXPECT_GT(rows[6].refreshes_per_question, 0.0);
  EXPECT_LT(rows[6].kl, rows[0].kl);
  // In-place refresh of every dependent (its own tokens re-forwarded behind exact rows) is exact
  // too, for fewer forward tokens than refreshing each over its whole prefix.
  EXPECT_EQ(rows[7].policy, "inplace");
  EXPECT_LT(rows[7].kl, 1e-4);
  EXPECT_DOUBLE_EQ(rows[7].refreshes_per_question, rows[1].refreshes_per_question);
  EXPECT_LT(rows[7].forward_tokens_per_question, rows[1].forward_tokens_per_question);
  EXPECT_EQ(rows[8].policy, "inplace-share");
  EXPECT_DOUBLE_EQ(rows[8].refreshes_per_question, rows[6].refreshes_per_question);
}
