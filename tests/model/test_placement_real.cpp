// The placement bench on stories260K: reuse-aware orders form fewer patches than the trace's
// order at the same fidelity to a re-prefill of what was served, and the bench says what
// reordering costs against the trace's own order.
#include <gtest/gtest.h>

#include "eval/placement_bench.h"
#include "support/paths.h"

using namespace kamera;

TEST(PlacementReal, Stories260KReuseAwareFormsLessAtEqualFidelity) {
  const std::string p = test_paths::stories_dir() + "/stories260K.bin";
  REQUIRE_MODEL_FILE(p);
  auto m = load_model(p);
  ASSERT_TRUE(m.ok()) << m.message();
  auto items =
      load_reuse_items(std::string(KAMERA_SOURCE_DIR) + "/data/reuse-stories260K.jsonl", **m);
  ASSERT_TRUE(items.ok()) << items.message();
  ContextOptions co;
  co.kv_tokens = placement_bench_kv_tokens(**m);
  auto ctx = Context::create(std::move(*m), co);
  ASSERT_TRUE(ctx.ok()) << ctx.message();
  PlacementOptions o;
  o.traces = {"reread"};
  o.policies = {"arrival", "offline"};
  o.steps = 12;
  auto r = run_placement_bench(**ctx, *items, o);
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
