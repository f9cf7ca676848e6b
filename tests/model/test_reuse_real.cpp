// The reuse harness on the real models and the project's own items (data/).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "eval/reuse_bench.h"
#include "support/paths.h"

using namespace kamera;

namespace {

void check_model(const std::string& model_path, const std::string& items_path) {
  auto m = load_model(model_path);
  ASSERT_TRUE(m.ok()) << m.message();
  auto items = load_reuse_items(items_path, **m);
  ASSERT_TRUE(items.ok()) << items.message();
  EXPECT_GE(items->size(), 40u);
  ContextOptions co;
  co.kv_tokens = harness_kv_tokens(*items);
  auto ctx = Context::create(std::move(*m), co);
  ASSERT_TRUE(ctx.ok()) << ctx.message();
  ReuseBenchOptions o;
  o.ranks = {1, 4, 16, kFullRank};
  auto r = run_reuse_bench(**ctx, *items, o);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->relocation_max_ulp_layer0, 0);  // relocation itself is exact
  EXPECT_LT(r->relocation_max_rel_err, 2e-6);  // deeper layers: f32 rounding of attention
  EXPECT_LT(r->full_rank_max_rel_err, 1e-5);
  const ArmSummary* blind = nullptr;
  const ArmSummary* full = nullptr;
  const ArmSummary* r16 = nullptr;
  for (const auto& a : r->arms) {
    if (a.name == "blind") blind = &a;
    if (a.name == "patch" && a.rank == kFullRank) full = &a;
    if (a.name == "patch" && a.rank == 16) r16 = &a;
  }
  ASSERT_TRUE(blind && full && r16);
  EXPECT_GT(blind->kl, 1e-4) << "blind reuse should lose measurable conditioning";
  EXPECT_LE(full->kl, 1e-6);
  EXPECT_GT(full->eta, 0.999);
  EXPECT_GT(r16->eta, 0.5);
  std::printf("  blind KL %.3g, rank-16 eta %.3f, full eta %.6f, %d flips\n", blind->kl, r16->eta,
              full->eta, r->n_flips);
}

}  // namespace

TEST(ReuseReal, Stories260K) {
  const std::string p = test_paths::stories_dir() + "/stories260K.bin";
  REQUIRE_MODEL_FILE(p);
  check_model(p, std::string(KAMERA_SOURCE_DIR) + "/data/reuse-stories260K.jsonl");
}

TEST(ReuseReal, Aidreams260K) {
  const std::string p = test_paths::aidreams_dir() + "/aidreams260K.bin";
  REQUIRE_MODEL_FILE(p);
  check_model(p, std::string(KAMERA_SOURCE_DIR) + "/data/reuse-aidreams260K.jsonl");
}

TEST(ReuseReal, CliJsonHasTheProtocolFields) {
  const std::string p = test_paths::stories_dir() + "/stories260K.gguf";
  REQUIRE_MODEL_FILE(p);
  const std::string cmd = std::string(KAMERA_BINARY_DIR) + "/bin/kamera reuse-bench -m " + p +
                          " --items " + KAMERA_SOURCE_DIR +
                          "/data/reuse-stories260K.jsonl --limit 4 -q --json";
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_TRUE(f);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  ASSERT_EQ(pclose(f), 0);
  auto j = nlohmann::json::parse(out);
  for (const char* k : {"relocation_max_ulp", "full_rank_max_rel_err", "arms", "timing_ms"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"reprefill", "reuse_blind", "reuse_patch", "compile"})
    EXPECT_TRUE(j["timing_ms"].contains(k)) << k;
  std::set<std::string> names;
  for (const auto& a : j["arms"]) {
    names.insert(a["name"].get<std::string>());
    for (const char* k :
         {"name", "rank", "kl", "eta", "flip_recover", "argmax_agree", "patch_bytes_fraction"})
      EXPECT_TRUE(a.contains(k)) << k;
    if (a["name"] == "patch" && a["rank"].is_string()) {
      EXPECT_EQ(a["rank"], "full");
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"reprefill", "blind", "patch", "patch_deep_half",
                                          "oracle_mask"}));
  // bad input: a clear error, non-zero exit
  const std::string bad = std::string(KAMERA_BINARY_DIR) + "/bin/kamera reuse-bench -m " + p +
                          " --items " + KAMERA_SOURCE_DIR +
                          "/data/reuse-stories260K.jsonl --ranks 0 -q --json 2>/dev/null";
  FILE* g = popen(bad.c_str(), "r");
  std::string eout;
  while ((n = fread(buf.data(), 1, buf.size(), g)) > 0) eout.append(buf.data(), n);
  EXPECT_NE(pclose(g), 0);
  EXPECT_NE(eout.find("error"), std::string::npos);
}
