// Window operations on the real models: the orderings of the paper's findings that must hold
// by construction (exact >= any other reorder arm, fresh == stale at zero turnover, full-rank
// removal patch exact), plus what the measurement shows, with thresholds.
#include <gtest/gtest.h>

#include "bench/window_bench.h"
#include "support/paths.h"

using namespace kamera;

namespace {

const WindowArm* find(const WindowBenchResult& r, const std::string& scen, const std::string& group,
                      const std::string& name, int rank) {
  for (const auto& a : r.arms)
    if (a.scenario == scen && a.group == group && a.name == name && a.rank == rank) return &a;
  return nullptr;
}

void check(const std::string& model_path, const std::string& items_path, int window_chunks) {
  auto m = load_model(model_path);
  ASSERT_TRUE(m.ok()) << m.message();
  auto items = load_reuse_items(items_path, **m);
  ASSERT_TRUE(items.ok()) << items.message();
  ContextOptions co;
  co.kv_tokens = window_bench_kv_tokens(**m);
  auto ctx = Context::create(std::move(*m), co);
  ASSERT_TRUE(ctx.ok()) << ctx.message();
  WindowBenchOptions o;
  o.max_items = 4;
  o.reorder_k = {3};
  o.window_chunks = window_chunks;
  auto r = run_window_bench(**ctx, *items, o);
  ASSERT_TRUE(r.ok()) << r.message();
  // slide: keep-as-is costs a metadata write, the full-rank removal patch restores re-prefill
  const auto* keep = find(*r, "slide", "head evicted", "keep", 0);
  const auto* full = find(*r, "slide", "head evicted", "removal_patch", kFullRank);
  ASSERT_TRUE(keep && full);
  EXPECT_LE(full->kl, 1e-6);
  EXPECT_GT(keep->kl, full->kl);
  // reorder: the ordering's own patch beats blind by a wide margin, orbit beats blind
  const auto* exact = find(*r, "reorder", "K=3", "exact", 8);
  const auto* orbit = find(*r, "reorder", "K=3", "orbit", 8);
  ASSERT_TRUE(exact && orbit);
  EXPECT_GT(exact->eta, 0.5);
  EXPECT_GT(orbit->eta, 0.3);
  // recall: with no turnover the stale patch is the fresh one
  const auto* stale0 = find(*r, "recall", "tau=0.00", "stale", 8);
  const auto* fresh0 = find(*r, "recall", "tau=0.00", "fresh", 8);
  const auto* stale1 = find(*r, "recall", "tau=1.00", "stale", 8);
  const auto* fresh1 = find(*r, "recall", "tau=1.00", "fresh", 8);
  ASSERT_TRUE(stale0 && fresh0 && stale1 && fresh1);
  EXPECT_NEAR(stale0->kl, fresh0->kl, 1e-12);
  EXPECT_GT(fresh1->eta, stale1->eta)
      << "after full turnover the fresh patch should beat the stale one";
  std::printf(
      "  slide keep KL %.3g; reorder K=3 eta exact %.3f orbit %.3f; recall tau=1 eta stale %.3f "
      "fresh %.3f\n",
      keep->kl, exact->eta, orbit->eta, stale1->eta, fresh1->eta);
}

}  // namespace

TEST(WindowReal, Stories260K) {
  const std::string p = test_paths::stories_dir() + "/stories260K.bin";
  REQUIRE_MODEL_FILE(p);
  check(p, std::string(KAMERA_SOURCE_DIR) + "/data/reuse-stories260K.jsonl", 5);
}

TEST(WindowReal, Aidreams260K) {
  const std::string p = test_paths::aidreams_dir() + "/aidreams260K.bin";
  REQUIRE_MODEL_FILE(p);
  check(p, std::string(KAMERA_SOURCE_DIR) + "/data/reuse-aidreams260K.jsonl", 3);
}
