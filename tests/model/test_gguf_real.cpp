// Opens the real stories260K GGUF (llama.cpp's CI model, all tensors f32) from shared/.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"

namespace kamera {
namespace {

TEST(GgufRealTest, Stories260K) {
  const std::string path = KAMERA_SHARED_DIR "/models/stories260K/stories260K.gguf";
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "real model not found at " << path
                 << " (set -DKAMERA_SHARED_DIR=<dir with models/stories260K/stories260K.gguf>)";
  }
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_int("llama.block_count"), 5);
  EXPECT_EQ(g.get_int("llama.embedding_length"), 64);
  ASSERT_EQ(g.tensors().size(), 48u);

  const GgufTensor* emb = g.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ne, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb->type, GgmlType::F32);

  const std::vector<std::string>* tokens = g.get_string_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");

  // Every tensor reads back, with finite values.
  for (const GgufTensor& t : g.tensors()) {
    auto v = g.read_f32(t);
    ASSERT_TRUE(v.ok()) << v.message();
    ASSERT_EQ(int64_t(v->size()), t.n_elements()) << t.name;
    for (float x : *v) ASSERT_TRUE(std::isfinite(x)) << t.name;
  }
}

}  // namespace
}  // namespace kamera
