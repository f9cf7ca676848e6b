// `kamera eval --suite smoke` and `kamera report` on the real models: every arm runs on both
// splits, the sanity properties hold on trained weights, and the report is written.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/temp_path.h"

namespace {

std::string run(const std::string& args, int* rc) {
  const std::string cmd = std::string(KAMERA_BINARY_DIR) + "/bin/kamera " + args;
  FILE* f = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (f && fgets(buf, sizeof buf, f)) out += buf;
  *rc = f ? pclose(f) : -1;
  return out;
}

const nlohmann::json* arm(const nlohmann::json& arms, const std::string& name,
                          const std::string& param) {
  for (const auto& a : arms)
    if (a["name"] == name && a["param"] == param) return &a;
  return nullptr;
}

void check(const std::string& dir, const std::string& stem) {
  const std::string model = dir + "/" + stem + ".bin", tok = dir + "/tok512.bin";
  const std::string out = unique_temp("kamera-eval-") + stem + ".json";
  int rc = 0;
  run("eval -m " + model + " -z " + tok + " --suite smoke -q -t 2 --data-dir " +
          std::string(KAMERA_SOURCE_DIR) + "/data -o " + out + " >/dev/null",
      &rc);
  ASSERT_EQ(rc, 0);
  std::ifstream f(out);
  const auto doc = nlohmann::json::parse(f);
  ASSERT_EQ(doc["splits"].size(), 2u);
  EXPECT_EQ(doc["splits"][0]["role"], "dev");
  EXPECT_EQ(doc["splits"][1]["role"], "heldout");
  for (const auto& split : doc["splits"]) {
    const auto& r = split["result"];
    const auto& arms = r["arms"];
    const std::string where = stem + "/" + split["name"].get<std::string>();
    for (const char* name : {"blind", "patch", "patch_deep_half", "cacheblend", "epic", "sink",
                             "vlcache", "oracle_delta_tokens", "partial_reprefill", "oracle_quest",
                             "shadowkv_lowrank_k", "inject_layer", "oracle_mask", "pooled_basis"}) {
      bool found = false;
      for (const auto& a : arms) found = found || a["name"] == name;
      EXPECT_TRUE(found) << where << ": no " << name << " arm";
    }
    const auto* blind = arm(arms, "blind", "");
    ASSERT_TRUE(blind);
    EXPECT_GT((*blind)["kl"].get<double>(), 1e-4) << where;
    // Re-prefilling B from layer 0 through the recompute path is the reference itself.
    const auto* p0 = arm(arms, "partial_reprefill", "l=0");
    ASSERT_TRUE(p0);
    EXPECT_LT((*p0)["kl"].get<double>(), 1e-9) << where;
    for (const auto& a : arms) {
      if (a["name"] == "patch" && a["rank"] == "full") {
        EXPECT_LT(a["kl"].get<double>(), 1e-9) << where;
      }
      const double rf = a["recompute_fraction"].get<double>();
      EXPECT_TRUE(rf >= 0 && rf <= 1) << where << " " << a["name"];
    }
    // Eckart-Young: no fixed rank-m basis reconstructs an item better than its own SVD.
    EXPECT_GE(r["pooled_basis_error_ratio"].get<double>(), 1.0 - 1e-6) << where;
    const double cells = r["head_cells_for_90"].get<double>();
    EXPECT_TRUE(cells > 0 && cells <= 1) << where;
    // Layer 0's K/V depend on the token alone: no deficit there.
    for (const auto& [key, value] : r["delta_by_layer"][0].items())
      if (key.rfind("rel_norm_", 0) == 0) {
        EXPECT_LT(value.get<double>(), 1e-6) << where << key;
      }
    EXPECT_EQ(r["relocation_max_ulp_layer0"], 0) << where;
  }
  EXPECT_FALSE(doc["timing_by_length"].empty());
  const std::string rep = unique_temp("kamera-report-") + stem;
  std::filesystem::remove_all(rep);
  run("report --in " + out + " --out " + rep + " >/dev/null", &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_TRUE(std::filesystem::exists(rep + "/README.md"));
  EXPECT_TRUE(std::filesystem::exists(rep + "/figures/eta_vs_rank.svg"));
}

}  // namespace

TEST(EvalReal, Stories260KSmokeSuiteAndReport) {
  REQUIRE_MODEL_FILE(test_paths::stories_dir() + "/stories260K.bin");
  check(test_paths::stories_dir(), "stories260K");
}

TEST(EvalReal, Aidreams260KSmokeSuiteAndReport) {
  REQUIRE_MODEL_FILE(test_paths::aidreams_dir() + "/aidreams260K.bin");
  check(test_paths::aidreams_dir(), "aidreams260K");
}
