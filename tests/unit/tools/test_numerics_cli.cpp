// --numerics on the command line (ops/numerics.h): `kamera info` and `bench` name the mode (info
// its Q8_0 path), the fingerprint differs from the default's (caches of the two never mix), and
// `kamera logits` with --numerics ggml gives llama.cpp's logits of a committed Q8_0 file
// (tests/data/quantized) within a tenth of the quantization's effect. Runs the built binary, as a
// user would.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/shell.h"

namespace {

const std::string kQuant = std::string(KAMERA_SOURCE_DIR) + "/tests/data/quantized/";

nlohmann::json run_json(const std::string& args) {
  const std::string cmd = std::string(KAMERA_BINARY_DIR) + "/bin/kamera " + args;
  const ShellOutput o = run_shell(cmd);
  EXPECT_EQ(o.rc, 0) << cmd << "\n" << o.err;
  return nlohmann::json::parse(o.out, nullptr, false);
}

std::vector<float> read_f32(const std::string& path, size_t count) {
  std::ifstream f(path, std::ios::binary);
  std::vector<float> v(count);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(count * 4));
  EXPECT_TRUE(f) << path;
  return v;
}

}  // namespace

TEST(NumericsCli, InfoNamesTheModeAndItsQ8_0Path) {
  const std::string file = kQuant + "smollm3-Q8_0.gguf";
  const auto def = run_json("info --json -m " + file);
  const auto ggml = run_json("info --json -m " + file + " --numerics ggml");
  ASSERT_TRUE(def.contains("model") && ggml.contains("model"));
  EXPECT_EQ(def["model"]["numerics"], "kamera");
  EXPECT_EQ(ggml["model"]["numerics"], "ggml");
  const std::string path = ggml["model"]["weight_types"]["q8_0"]["path"];
  EXPECT_NE(path.find("ggml-order"), std::string::npos) << path;
  EXPECT_EQ(std::string(def["model"]["weight_types"]["q8_0"]["path"]).find("ggml-order"),
            std::string::npos);
  EXPECT_NE(def["model"]["fingerprint"], ggml["model"]["fingerprint"]);
}

// The command docs/MODELS.md shows: smollm3 Q8_0 is the file whose default logits sit 0.33 of the
// quantization's effect from llama.cpp's (an f16 tie of a q8_0 scale, tests/data/quantized).
TEST(NumericsCli, LogitsWithGgmlNumericsFollowLlamaCpp) {
  const std::string tokens = "1,17,42,99,5,63,120,7,88,31,2,76,54,101,9,66";
  const auto j = run_json("logits -m " + kQuant + "smollm3-Q8_0.gguf --tokens " + tokens +
                          " --all-positions --json -t 1 --numerics ggml");
  ASSERT_TRUE(j.contains("logits")) << j;
  const size_t n_vocab = j["n_vocab"].get<size_t>(), n = j["logits"].size();
  ASSERT_EQ(n, 16u);
  const auto quant = read_f32(kQuant + "smollm3-Q8_0.f32", n * n_vocab);
  const auto f32 = read_f32(kQuant + "smollm3-f32.f32", n * n_vocab);
  double diff = 0, effect = 0;
  for (size_t r = 0; r < n; ++r)
    for (size_t v = 0; v < n_vocab; ++v) {
      const size_t i = r * n_vocab + v;
      diff = std::max(diff, std::fabs(double(j["logits"][r][v].get<float>()) - quant[i]));
      effect = std::max(effect, std::fabs(double(quant[i]) - f32[i]));
    }
  ASSERT_GT(effect, 0.0);
  std::printf("kamera logits --numerics ggml: %.3g of the quantization's effect\n", diff / effect);
  EXPECT_LE(diff / effect, 0.1);
}

// The bench commands docs/MODELS.md times the mode with, on a small file: they run and say so.
TEST(NumericsCli, BenchRunsWithGgmlNumerics) {
  const std::string m = "-m " + kQuant + "smollm3-Q8_0.gguf -t 1 --numerics ggml --json";
  const auto prefill = run_json("bench prefill --tokens 8 --reps 1 " + m);
  EXPECT_EQ(prefill["model"]["numerics"], "ggml") << prefill;
  const auto decode = run_json("bench decode --tokens 2 --ctx 4 --reps 1 " + m);
  EXPECT_EQ(decode["model"]["numerics"], "ggml") << decode;
}
