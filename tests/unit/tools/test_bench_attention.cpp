// `kamera bench attention` (docs/BENCHMARKS.md, "Decode at depth"): one decode step's attention
// of the 0.5b shape alone, the split over the keys against the per-head path, in the documented
// command's form at a small depth.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/shell.h"

namespace {

const std::string kKamera = std::string(KAMERA_BINARY_DIR) + "/bin/kamera";

nlohmann::json bench(const std::string& args) {
  const ShellOutput o = run_shell(kKamera + " bench attention " + args + " --json");
  EXPECT_EQ(o.rc, 0) << o.err;
  return nlohmann::json::parse(o.out);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Past kSplitMinKeys (1024) the step takes the split path, whose sums differ from the per-head
// path's in order only: the two outputs agree to float rounding. The medians and the speed-up
// are those of the per-step times it prints.
TEST(BenchAttention, SplitAgainstPerHeadAsTheDepthBlockRunsIt) {
  const auto j = bench("--ctx 1100 --reps 3 -t 1 --kv-type bf16");
  EXPECT_EQ(j.at("keys"), 1100);
  EXPECT_EQ(j.at("kv_type"), "bf16");
  EXPECT_EQ(j.at("layers"), 24);  // the 0.5b preset: 24 layers, 14 heads over 2, head 64
  EXPECT_EQ(j.at("n_heads"), 14);
  EXPECT_EQ(j.at("n_kv_heads"), 2);
  EXPECT_EQ(j.at("timer"), "thread_cpu");
  EXPECT_TRUE(j.at("split_taken").get<bool>());
  EXPECT_LT(j.at("relative_gap").get<double>(), 1e-5);
  EXPECT_TRUE(j.at("outputs_agree").get<bool>());
  const std::vector<double> split = j.at("split_ms_all"), head = j.at("per_head_ms_all");
  ASSERT_EQ(split.size(), 3u);
  ASSERT_EQ(head.size(), 3u);
  const double s = j.at("split_ms_median"), h = j.at("per_head_ms_median");
  EXPECT_DOUBLE_EQ(s, median_of(split));
  EXPECT_DOUBLE_EQ(h, median_of(head));
  EXPECT_GT(s, 0.0);
  EXPECT_NEAR(j.at("speedup").get<double>(), h / s, 1e-9 * h / s);
}

// Below the threshold both arms run the per-head path: the same code on the same inputs gives
// the same bits, so the gap is exactly zero.
TEST(BenchAttention, BelowTheSplitThresholdBothArmsAreThePerHeadPath) {
  const auto j = bench("--ctx 300 --reps 1 -t 2 --kv-type f32");
  EXPECT_FALSE(j.at("split_taken").get<bool>());
  EXPECT_EQ(j.at("timer"), "wall");
  EXPECT_EQ(j.at("relative_gap").get<double>(), 0.0);
  EXPECT_EQ(j.at("first_output").at("split"), j.at("first_output").at("per_head"));
}

// The mode is listed in bench's --help, and a bad depth is refused with a JSON error.
TEST(BenchAttention, HelpNamesTheModeAndBadArgumentsFail) {
  const ShellOutput help = run_shell(kKamera + " bench --help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_NE(help.out.find("attention (one decode step's attention alone"), std::string::npos)
      << help.out;
  const ShellOutput bad = run_shell(kKamera + " bench attention --ctx 0 --json");
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.out.find("--ctx, --reps and -t must be >= 1"), std::string::npos) << bad.out;
}

}  // namespace
