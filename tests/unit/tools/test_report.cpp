// `kamera report` (tools/report.h): the Markdown and SVG figures it writes from an eval result.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "eval/suite.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "tools/report.h"

using namespace kamera;

// `kamera report` on a small fixture (the smoke suite on a tiny M-RoPE model): a Markdown file
// that links every figure, and every figure a non-empty SVG drawn from data.
TEST(EvalReport, ProducesEveryFigureFromASmallFixture) {
  auto ctx = tiny::context(tiny::model_path("qwen2vl"), 8000);
  ASSERT_TRUE(ctx);
  const Model* m = &ctx->model();
  auto splits = default_splits(*m, "/nonexistent", true);
  ASSERT_TRUE(splits.ok()) << splits.message();
  ASSERT_EQ(splits->size(), 2u) << "random tokens and frames";
  for (auto& s : *splits) s.items.resize(2);
  SuiteOptions so;
  so.smoke = true;
  so.timing_lengths = {8, 16};
  so.timing_reps = 1;
  auto doc = run_eval_suite(*ctx, *splits, so);
  ASSERT_TRUE(doc.ok()) << doc.message();
  (*doc)["model_name"] = "tiny-qwen2vl";
  const std::string dir = unique_temp("kamera-report-test");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string in = dir + "/fixture.json";
  std::ofstream(in) << doc->dump();
  auto ri = read_eval_result(in);
  ASSERT_TRUE(ri.ok()) << ri.message();
  ReportOptions ro;
  ro.out_dir = dir + "/report";
  auto out = write_report({*ri}, ro);
  ASSERT_TRUE(out.ok()) << out.message();
  std::ifstream f(out->markdown);
  const std::string md((std::istreambuf_iterator<char>(f)), {});
  // the figures the issue names: eta vs rank, KL per arm, delta by layer and rank, token
  // diffuseness, serve vs re-prefill time, byte budgets (and single-layer injection)
  for (const char* fig : {"eta_vs_rank", "kl_by_arm_tiny-qwen2vl_random-tokens", "delta_by_layer",
                          "delta_energy_tiny-qwen2vl_random-tokens", "token_diffuseness",
                          "serve_vs_reprefill", "budget_tiny-qwen2vl_frames", "inject_layer"}) {
    const std::string svg = ro.out_dir + "/figures/" + fig + ".svg";
    ASSERT_TRUE(std::filesystem::exists(svg)) << svg;
    std::ifstream s(svg);
    const std::string text((std::istreambuf_iterator<char>(s)), {});
    EXPECT_NE(text.find("<svg"), std::string::npos) << fig;
    EXPECT_TRUE(text.find("<path") != std::string::npos ||
                text.find("<polyline") != std::string::npos)
        << fig << ": nothing drawn";
    EXPECT_NE(md.find(std::string("figures/") + fig + ".svg"), std::string::npos) << fig;
  }
  size_t images = 0;
  for (size_t at = md.find("!["); at != std::string::npos; at = md.find("![", at + 2)) ++images;
  EXPECT_EQ(out->figures.size(), images);
  EXPECT_NE(md.find("Where a baseline beats the patch"), std::string::npos);
  // A file that is not an eval result is refused by name.
  std::ofstream(dir + "/bad.json") << "{\"kind\": \"other\"}";
  auto bad = read_eval_result(dir + "/bad.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("bad.json"), std::string::npos);
}
