// Quantized files (Q8_0, Q4_K_M) made by llama.cpp's llama-quantize from the committed family
// fixtures (tests/data/quantized/README.md): kamera's logits, in one batch (the prefill path) and
// one token at a time (the decode path), against llama.cpp's run of the same file. The measure is
// the quantization's own effect, max |llama.cpp quantized - llama.cpp f32|: with the default
// numerics kamera must be within max_ratio (0.1 unless the manifest says why) of it at every
// position, and with --numerics ggml (ops/numerics.h) within 0.1 on every file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/gguf_copy.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/quantized/";

std::vector<float> read_f32(const std::string& name, size_t count) {
  std::ifstream f(kDir + name, std::ios::binary);
  std::vector<float> v(count);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(count * 4));
  EXPECT_TRUE(f) << "short logits file " << name;
  return v;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

// ggml's roundings meet the bound on every file.
constexpr double kGgmlBound = 0.1;

// One file with one numerics: both paths within bound x the quantization's effect.
void check_case(const nlohmann::json& c, Numerics numerics, double bound) {
  const std::string name = c["name"].get<std::string>();
  const std::string path = kDir + c["file"].get<std::string>();
  EXPECT_EQ(tiny::file_xxh3(path), c["xxh3_64"].get<std::string>());
  LoadOptions o;
  o.n_ctx = c.value("n_ctx", int64_t(0));
  o.numerics = numerics;
  auto m = load_model(path, o);
  ASSERT_TRUE(m.ok()) << m.message();
  const auto ids = c["tokens"].get<std::vector<int32_t>>();
  const size_t count = ids.size() * size_t((*m)->cfg.n_vocab);
  const auto f32 = read_f32(c["f32_logits"], count), quant = read_f32(c["logits"], count);
  // llama.cpp computes each row on its own: one token per llama_decode gives the same logits,
  // so the one reference stands for both of kamera's paths.
  EXPECT_LE(tiny::max_abs_diff(read_f32(c["one_by_one_logits"], count), quant),
            1e-6 * max_abs(f32));
  const double effect = tiny::max_abs_diff(quant, f32);
  ASSERT_GT(effect, 1e-3 * max_abs(f32)) << "the file is not quantized";
  const double batch = tiny::max_abs_diff(tiny::prefill_all(**m, ids, 512), quant) / effect;
  const double decode = tiny::max_abs_diff(tiny::prefill_all(**m, ids, 1), quant) / effect;
  std::printf("%-20s %-8s %9.2e %9.2g %9.2g %6.2f\n", name.c_str(), numerics_name(numerics),
              effect / max_abs(f32), batch, decode, bound);
  EXPECT_LE(batch, bound);
  EXPECT_LE(decode, bound);
}

// Every case of the manifest `manifest_name` (n_cases of them) with each numerics, as the header
// says.
void check_cases(const std::string& manifest_name, size_t n_cases) {
  std::ifstream mf(kDir + manifest_name);
  ASSERT_TRUE(mf);
  const auto manifest = nlohmann::json::parse(mf);
  ASSERT_EQ(manifest["cases"].size(), n_cases);
  std::printf("%-20s %-8s %9s %9s %9s %6s\n", "case", "numerics", "effect", "batch", "decode",
              "bound");
  for (const auto& c : manifest["cases"])
    for (Numerics numerics : {Numerics::Kamera, Numerics::Ggml}) {
      const std::string name = c["name"].get<std::string>();
      SCOPED_TRACE(name + ", numerics " + numerics_name(numerics));
      const double bound = numerics == Numerics::Ggml ? kGgmlBound : c["max_ratio"].get<double>();
      check_case(c, numerics, bound);
    }
}

}  // namespace

TEST(QuantizedParity, LogitsFollowLlamaCppWithinATenthOfTheQuantizationEffect) {
  check_cases("llama_cpp_logits.json", 10u);
}

// gpt-oss quantized by llama-quantize as MXFP4_MOE (experts MXFP4, the other matrices Q8_0) from
// an f32 file of the converter's layout (tests/data/quantized/README.md, "gpt-oss MXFP4").
TEST(QuantizedParity, GptOssMxfp4FollowsLlamaCppWithinATenthOfTheQuantizationEffect) {
  check_cases("mxfp4_logits.json", 1u);
}
