// `kamera demo --decoder D --vision V --frames DIR` on tiny random-weight Qwen2-VL files and a
// folder of generated PNG frames: with full-rank patches kamera's window equals re-prefill on the
// slide and reorder questions (KL ~ 0, below blind reuse's), recall questions run on a fork, and
// misuse is a clear error. Runs the built `kamera` binary.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "minivl/clips.h"
#include "support/temp_path.h"

namespace {

struct Output {
  std::string out, err;
  int rc = -1;
};

Output kamera_cli(const std::string& args) {
  const std::string err_path = unique_temp("kamera-frames-demo.stderr");
  const std::string cmd = std::string(KAMERA_BINARY_DIR) + "/bin/kamera " + args + " 2>" + err_path;
  Output o;
  FILE* f = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  for (size_t n; f && (n = fread(buf.data(), 1, buf.size(), f)) > 0;) o.out.append(buf.data(), n);
  o.rc = f ? pclose(f) : -1;
  std::ifstream e(err_path);
  o.err.assign(std::istreambuf_iterator<char>(e), {});
  return o;
}

class FramesDemo : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = unique_temp("kamera-frames-demo/");
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "frames");
    dec_ = dir_ + "dec.gguf";
    mm_ = dir_ + "mmproj.gguf";
    ASSERT_EQ(kamera_cli("make-model --arch qwen2vl --preset tiny --seed 3 -o " + dec_).rc, 0);
    ASSERT_EQ(kamera_cli("make-model --arch qwen2vl-mmproj --preset tiny --seed 4 -o " + mm_).rc,
              0);
    // five 56 x 84 frames (2 x 3 merged patches each): a square that moves and changes colour
    for (int i = 0; i < 5; ++i) {
      kamera::minivl::Canvas c(84, 56, {20, 20, 30});
      c.fill(10 + 12 * i, 8 + 5 * i, 24, 20,
             {uint8_t(50 * i + 40), uint8_t(200 - 30 * i), uint8_t(90 + 20 * i)});
      const auto st = kamera::minivl::write_png(dir_ + "frames/f" + std::to_string(i) + ".png", c);
      ASSERT_TRUE(st.ok()) << st.message();
    }
  }
  static inline std::string dir_, dec_, mm_;
};

TEST_F(FramesDemo, FullRankWindowEqualsReprefill) {
  const Output o = kamera_cli("demo --decoder " + dec_ + " --vision " + mm_ + " --frames " + dir_ +
                              "frames --window 2 --rank full --reps 1 --recall-every 2 "
                              "--reorder-every 3 --question 'what moved' --json");
  ASSERT_EQ(o.rc, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["steps"].size(), 5u);
  EXPECT_EQ(j["steps"][0]["frame"], "f0.png");
  EXPECT_EQ(j["steps"][4]["frame"], "f4.png");
  EXPECT_EQ(j["steps"][0]["tokens"].get<int>(), 2 * 3 + 2);  // merged patches + delimiters
  EXPECT_EQ(j["steps"][2]["evicted"].get<int>(), 0);
  const auto& s = j["summary"];
  EXPECT_EQ(s["slide"]["count"].get<int>(), 1);
  EXPECT_EQ(s["reorder"]["count"].get<int>(), 1);
  EXPECT_EQ(s["recall"]["count"].get<int>(), 2);
  int checked = 0;
  for (const auto& st : j["steps"]) {
    if (!st.contains("question")) continue;
    const auto& q = st["question"];
    const double kl = q["kl"].get<double>(), kl_blind = q["kl_blind"].get<double>();
    ASSERT_TRUE(std::isfinite(kl) && kl >= 0 && std::isfinite(kl_blind));
    const std::string sit = q["situation"];
    if (sit == "slide" || sit == "reorder") {  // full-rank patches: the conditioned KV itself
      EXPECT_LT(kl, 1e-7) << sit;
      EXPECT_GT(kl_blind, 10 * kl + 1e-9) << sit;  // blind reuse lacks the conditioning
      EXPECT_EQ(q["kamera"], q["reprefill"]);
      ++checked;
    }
    if (sit == "reorder") {  // the window reversed
      EXPECT_EQ(q["frames"][0].get<int>(), st["step"].get<int>());
    }
    if (sit == "recall") {  // an evicted frame at the front, the newest kept
      EXPECT_LT(q["recalled"].get<int>(), st["step"].get<int>() - 1);
      EXPECT_EQ(q["frames"][0], q["recalled"]);
    }
  }
  EXPECT_EQ(checked, 2);
}

TEST_F(FramesDemo, MisuseIsAnError) {
  const Output a = kamera_cli("demo --frames " + dir_ + "frames --json");
  EXPECT_NE(a.rc, 0);
  EXPECT_NE(a.out.find("--decoder"), std::string::npos) << a.out;
  std::filesystem::create_directories(dir_ + "one");
  std::filesystem::copy_file(dir_ + "frames/f0.png", dir_ + "one/f0.png",
                             std::filesystem::copy_options::overwrite_existing);
  const Output b = kamera_cli("demo --decoder " + dec_ + " --vision " + mm_ + " --frames " + dir_ +
                              "one --json");
  EXPECT_NE(b.rc, 0);
  EXPECT_NE(b.out.find("at least 2"), std::string::npos) << b.out;
  {
    std::ofstream bad(dir_ + "one/f1.png");
    bad << "not a png";
  }
  const Output c = kamera_cli("demo --decoder " + dec_ + " --vision " + mm_ + " --frames " + dir_ +
                              "one --json");
  EXPECT_NE(c.rc, 0);
  EXPECT_NE(c.out.find("f1.png"), std::string::npos) << c.out;
}

}  // namespace
