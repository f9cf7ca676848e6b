// The placement bench on stories260K: reuse-aware orders form fewer patches than the trace's
// order at the same fidelity to a re-prefill of what was served, and the bench says what
// reordering costs against the trace's own order.
#include <gtest/gtest.h>

#include "bench/placement_bench.h"
#include "support/stories_bench.h"

using namespace kamera;

TEST(PlacementReal, Stories260KReuseAwareFormsLessAtEqualFidelity) {
  LOAD_STORIES_BENCH(b, placement_bench_kv_tokens);
  PlacementOptions o;
  o.traces = {"reread"};
  o.policies = {"arrival", "offline"};
  o.steps = 12;
  auto r = run_placement_bench(*b.ctx, b.items, o);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->rows.size(), 2u);
  const auto &arrival = r->rows[0], &offline = r->rows[1];
  EXPECT_LT(offline.forms_per_question, 0.5 * arrival.forms_per_question);
  EXPECT_GT(offline.hit_rate, arrival.hit_rate);
  // the same rank-8 patches, so the same fidelity to what was served: both far below blind
  EXPECT_LT(offline.kl_same, 0.05 * offline.kl_blind);
  EXPECT_LT(arrival.kl_same, 0.05 * arrival.kl_blind);
  // arrival serves the trace's order: its two KLs are one measurement
  EXPECT_DOUBLE_EQ(arrival.kl_same, arrival.kl_arrival);
  EXPECT_GT(offline.reordered, 0.5);
  std::printf("  forms/question arrival %.2f offline %.2f; KL same %.2e %.2e\n",
              arrival.forms_per_question, offline.forms_per_question, arrival.kl_same,
              offline.kl_same);
}

// The adaptive patch plan: with nothing served blind and the whole energy kept it is the fixed
// plan (same forms, same fidelity); served blind above every chunk's patch energy, it forms each
// chunk's patch once (to learn it) and then nothing, and its fidelity falls to blind reuse's.
TEST(PlacementReal, AdaptivePlanSpansFixedToBlind) {
  LOAD_STORIES_BENCH(b, placement_bench_kv_tokens);
  PlacementOptions o;
  o.traces = {"reread"};
  o.policies = {"arrival"};
  o.plans = {"fixed", "adaptive"};
  o.steps = 10;
  o.plan_blind = 0.0;
  o.plan_energy = 1.0;
  auto r = run_placement_bench(*b.ctx, b.items, o);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->rows.size(), 2u);
  const auto &fixed = r->rows[0], &same = r->rows[1];
  EXPECT_EQ(same.plan, "adaptive");
  EXPECT_DOUBLE_EQ(same.forms_per_question, fixed.forms_per_question);
  EXPECT_DOUBLE_EQ(same.blind_share, 0.0);
  EXPECT_NEAR(same.kl_same, fixed.kl_same, 1e-6 + 1e-3 * fixed.kl_same);
  o.plans = {"adaptive"};
  o.plan_blind = 1.0;  // a patch never carries its canonical's whole energy here
  auto rb = run_placement_bench(*b.ctx, b.items, o);
  ASSERT_TRUE(rb.ok()) << rb.message();
  const auto& blind = rb->rows[0];
  EXPECT_GT(blind.blind_share, 0.5);
  EXPECT_LE(blind.forms_per_question * o.steps, double(o.pool_chunks));  // one form per chunk
  EXPECT_LT(blind.forms_per_question, fixed.forms_per_question);
  EXPECT_GT(blind.kl_same, 5 * fixed.kl_same);
  EXPECT_LE(blind.kl_same, 1.5 * blind.kl_blind);
}
