// The same real model in three files (llama2.c v0, v1, GGUF) gives the same tokens and logits,
// and the CLI reproduces the greedy story llama2.c prints.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "model/forward.h"
#include "model/sampler.h"
#include "support/paths.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

std::vector<float> greedy_logits(const Model& m, int steps, std::vector<int32_t>* tokens) {
  auto pool = tiny::pool_for(m, steps + 1);
  Engine e(m, 2);
  const SeqId s = pool->create_sequence();
  std::vector<float> all;
  int32_t tok = 1;
  for (int pos = 0; pos < steps; ++pos) {
    const Pos p = Pos::linear(pos);
    auto l = e.forward(*pool, s, ForwardInput::from_tokens({&tok, 1}, {&p, 1}));
    EXPECT_TRUE(l.ok());
    all.insert(all.end(), l->begin(), l->end());
    tok = argmax(*l);
    tokens->push_back(tok);
  }
  return all;
}

std::string run_cli(const std::string& args) {
  const std::string cmd = std::string(KAMERA_BINARY_DIR) + "/bin/kamera " + args + " 2>/dev/null";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

}  // namespace

TEST(Formats, Stories260KBinV1AndGgufAgree) {
  const std::string dir = test_paths::stories_dir();
  REQUIRE_MODEL_FILE(dir + "/stories260K.gguf");
  REQUIRE_MODEL_FILE(dir + "/stories260K_v1.bin");
  LoadOptions lo;
  lo.tokenizer_path = dir + "/tok512.bin";
  auto v0 = load_model(dir + "/stories260K.bin", lo);
  auto v1 = load_model(dir + "/stories260K_v1.bin", lo);
  auto gg = load_model(dir + "/stories260K.gguf");
  ASSERT_TRUE(v0.ok()) << v0.message();
  ASSERT_TRUE(v1.ok()) << v1.message();
  ASSERT_TRUE(gg.ok()) << gg.message();
  EXPECT_EQ((*v0)->format, "llama2c-v0");
  EXPECT_EQ((*v1)->format, "llama2c-v1");
  EXPECT_EQ((*gg)->format, "gguf");
  // Same weights, so the same fingerprint (the fingerprint covers config and weights).
  EXPECT_EQ((*v0)->fingerprint, (*gg)->fingerprint);
  EXPECT_EQ((*v0)->fingerprint, (*v1)->fingerprint);
  std::vector<int32_t> t0, t1, t2;
  auto l0 = greedy_logits(**v0, 200, &t0);
  auto l1 = greedy_logits(**v1, 200, &t1);
  auto l2 = greedy_logits(**gg, 200, &t2);
  EXPECT_EQ(t0, t1);
  EXPECT_EQ(t0, t2);
  EXPECT_LT(tiny::max_abs_diff(l0, l1), 1e-5);
  EXPECT_LT(tiny::max_abs_diff(l0, l2), 1e-5);
  std::printf("  max |logit diff| v0-v1 %.3g, v0-gguf %.3g over %zu logits\n",
              tiny::max_abs_diff(l0, l1), tiny::max_abs_diff(l0, l2), l0.size());
  // The embedded GGUF vocabulary and tok512.bin tokenize alike.
  const std::string text = "Once upon a time, there was a little girl named Lily. She loved cats!";
  EXPECT_EQ((*v0)->tokenizer->encode(text, true), (*gg)->tokenizer->encode(text, true));
}

// The greedy story Karpathy documents for stories260K (llama2.c README), printed by the CLI.
TEST(Formats, CliGreedyStoryMatchesLlama2c) {
  const std::string dir = test_paths::stories_dir();
  REQUIRE_MODEL_FILE(dir + "/stories260K.bin");
  const std::string want =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park. One day, she saw a big, red ball. She wanted to play with it, but it was too high";
  for (const std::string file : {"stories260K.bin", "stories260K_v1.bin", "stories260K.gguf"}) {
    const std::string tok = file == "stories260K.gguf" ? "" : " -z " + dir + "/tok512.bin";
    const std::string out = run_cli("generate -m " + dir + "/" + file + tok + " -n 256 --temp 0");
    EXPECT_EQ(out.substr(0, want.size()), want) << file;
  }
  std::printf("  %zu characters compared per file\n", want.size());
}

TEST(Formats, AidreamsLoadsAsMha) {
  const std::string dir = test_paths::aidreams_dir();
  REQUIRE_MODEL_FILE(dir + "/aidreams260K.bin");
  auto m = load_model(dir + "/aidreams260K.bin");  // finds tok512.bin beside it
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ((*m)->cfg.n_heads, 4);
  EXPECT_EQ((*m)->cfg.n_kv_heads, 4);
  EXPECT_EQ((*m)->cfg.n_layers, 4);
  EXPECT_EQ((*m)->cfg.ctx_len, 128);
  ASSERT_TRUE((*m)->tokenizer.has_value());
}
