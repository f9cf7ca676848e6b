// Logits of files quantized by llama.cpp's llama-quantize against llama.cpp's own logits for the
// same files (fixtures in tests/data/llama_logits, made as its README says). The tolerance is a
// quarter of the quantization's own effect: RMS over every position and vocabulary entry of
// (kamera - llama.cpp on the quantized file) <= 0.25 x RMS of (llama.cpp quantized - llama.cpp
// F32). And the argmax agrees at >= 90% of positions. kamera runs token by token (the decode
// path), which quantizes activations to the weight type's 8-bit dot type as llama.cpp does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>

#include "support/tiny_models.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/llama_logits/";

std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<float> v;
  float x;
  while (f.read(reinterpret_cast<char*>(&x), sizeof(x))) v.push_back(x);
  return v;
}

std::vector<int32_t> tokens() {
  std::ifstream f(kDir + "tokens.txt");
  std::vector<int32_t> ids;
  std::string item;
  while (std::getline(f, item, ',')) ids.push_back(std::stoi(item));
  return ids;
}

// Every position's logits, one decode step per token.
std::vector<float> decode_logits(const Model& m, const std::vector<int32_t>& ids) {
  auto pool = tiny::pool_for(m, int(ids.size()) + 16);
  Engine e(m, 1);
  const SeqId s = pool->create_sequence();
  const auto pos = tiny::linear_positions(int(ids.size()));
  std::vector<float> all;
  for (size_t t = 0; t < ids.size(); ++t) {
    auto l = e.forward(*pool, s, ForwardInput::from_tokens({&ids[t], 1}, {&pos[t], 1}));
    EXPECT_TRUE(l.ok()) << l.message();
    if (!l.ok()) return {};
    all.insert(all.end(), l->begin(), l->end());
  }
  return all;
}

double rms_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(s / double(a.size()));
}

double argmax_agreement(const std::vector<float>& a, const std::vector<float>& b, int n_vocab) {
  const size_t n = a.size() / size_t(n_vocab);
  int same = 0;
  for (size_t t = 0; t < n; ++t) {
    auto row = [&](const std::vector<float>& v) {
      const float* r = v.data() + t * size_t(n_vocab);
      return std::max_element(r, r + n_vocab) - r;
    };
    same += row(a) == row(b);
  }
  return double(same) / double(n);
}

struct Case {
  const char* arch;
  const char* type;
};

class LlamaLogits : public testing::TestWithParam<Case> {};

}  // namespace

TEST_P(LlamaLogits, WithinAQuarterOfTheQuantizationEffect) {
  const Case c = GetParam();
  const std::string base = kDir + c.arch + "-" + c.type;
  auto m = tiny::load(base + ".gguf");
  ASSERT_TRUE(m);
  const auto ids = tokens();
  ASSERT_EQ(ids.size(), 32u);
  const auto ref_f32 = read_f32(kDir + c.arch + "-f32.logits");
  const auto ref_q = read_f32(base + ".logits");
  ASSERT_EQ(ref_q.size(), ids.size() * size_t(m->cfg.n_vocab));
  ASSERT_EQ(ref_f32.size(), ref_q.size());
  const auto got = decode_logits(*m, ids);
  ASSERT_EQ(got.size(), ref_q.size());
  const double effect = rms_diff(ref_q, ref_f32), err = rms_diff(got, ref_q);
  EXPECT_GT(effect, 0.0);
  std::printf("%s %s: rms(kamera - llama.cpp) %.4g, quantization effect %.4g, ratio %.3f\n", c.arch,
              c.type, err, effect, err / effect);
  EXPECT_LE(err, 0.25 * effect) << c.arch << " " << c.type << ": rms error " << err
                                << " vs the quantization's own effect " << effect;
  EXPECT_GE(argmax_agreement(got, ref_q, m->cfg.n_vocab), 0.9) << c.arch << " " << c.type;
}

INSTANTIATE_TEST_SUITE_P(Files, LlamaLogits,
                         testing::Values(Case{"llama", "Q4_K_M"}, Case{"llama", "Q6_K"},
                                         Case{"llama", "Q8_0"}, Case{"llama", "Q5_0"},
                                         Case{"llama", "IQ4_NL"}, Case{"llama", "Q2_K"},
                                         Case{"llama", "IQ4_XS"}, Case{"qwen2", "Q4_K_M"},
                                         Case{"qwen3", "Q4_K_M"}, Case{"qwen3", "Q8_0"},
                                         Case{"qwen3moe", "Q4_K_M"}),
                         [](const testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.arch) + "_" + i.param.type;
                         });

// The qwen2 file has 192-wide rows (not a multiple of 256): llama-quantize wrote Q4_K_M's
// fallbacks (q5_0, q8_0) for those and k-quants for the 512-wide ffn_down. It mixes types.
TEST(LlamaLogitsFile, MixedTypesLoadInTheirOwnTypes) {
  auto m = tiny::load(kDir + "qwen2-Q4_K_M.gguf");
  ASSERT_TRUE(m);
  std::set<std::string> types;
  m->for_each_weight([&](const std::string& name, const Weight& w) {
    types.insert(ggml_type_name(w.type()));
    // Only Q8_0 matrices the decode path repacks are held in a copy (it replaces their pages).
    EXPECT_EQ(w.owned(), w.layout() != WeightLayout::Rows)
        << name << ": used from the mapped file, not copied";
  });
  EXPECT_GE(types.size(), 2u);
  EXPECT_EQ(types.count("f32"), 0u) << "no weight matrix widened to f32";
  EXPECT_EQ(m->layers[0].w_down.cols() % 256, 0);
}
