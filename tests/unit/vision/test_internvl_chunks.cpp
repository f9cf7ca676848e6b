// An InternVL picture as a chunk (vision/internvl_chunks.h) beside the committed tiny qwen2 decoder
// (tests/data/internvl): the prompt's layout and the decoder's logits after the picture against
// llama.cpp d32676d's mtmd on the same prompt, and the picture's chunk placed anywhere from its
// canonical KV equal to a fresh prefill there. llama.cpp decodes the rows of an internvl picture
// causally, as kamera does.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cache/chunk_cache.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "support/chunk_relocation.h"
#include "support/idefics3_fixture.h"  // read_f32, rel_diff
#include "support/tiny_models.h"
#include "vision/internvl_chunks.h"

using namespace kamera;
using idefics3_fixture::read_f32;
using idefics3_fixture::rel_diff;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/internvl/";

size_t argmax(const float* v, size_t n) {
  return size_t(std::max_element(v, v + n) - v);
}

// "<|im_start|>user\n<__media__>\nthe<|im_end|>\n<|im_start|>assistant\n" as llama.cpp's mtmd
// chunked it: the text before the picture (ending in <img>), after it (from </img>).
struct Prompt {
  std::vector<int32_t> before, after;
  int image_rows = 0;
};

Prompt llama_cpp_prompt() {
  std::ifstream jf(kDir + "llama_cpp_32.json");
  const auto ref = nlohmann::json::parse(jf);
  Prompt p;
  bool seen = false;
  for (const auto& c : ref["chunks"]) {
    if (c.contains("image")) {
      p.image_rows = c["image"].get<int>();
      seen = true;
      continue;
    }
    for (int32_t t : c["text"]) (seen ? p.after : p.before).push_back(t);
  }
  return p;
}

}  // namespace

TEST(InternvlChunks, LayoutMatchesLlamaCppMtmd) {
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
  const Tokenizer& tok = *model->tokenizer;
  const VisionDelimiters d = internvl_delimiters(&tok);
  ASSERT_EQ(d.open.size(), 1u);
  ASSERT_EQ(d.close.size(), 1u);
  const Prompt p = llama_cpp_prompt();
  auto enc = [&](const char* s) { return tok.encode(s, false); };
  std::vector<int32_t> before = enc("<|im_start|>user\n");
  before.insert(before.end(), d.open.begin(), d.open.end());
  std::vector<int32_t> after = d.close;
  for (int32_t t : enc("\nthe<|im_end|>\n<|im_start|>assistant\n")) after.push_back(t);
  EXPECT_EQ(before, p.before);
  EXPECT_EQ(after, p.after);
  auto tower = InternvlVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  EXPECT_EQ(p.image_rows, tower->cfg.rows());
  EXPECT_EQ(internvl_picture_rows(32, 32, tower->cfg), p.image_rows);
  EXPECT_EQ(internvl_picture_rows(64, 64, tower->cfg), 5 * 16);  // 2 x 2 tiles and a thumbnail
  EXPECT_TRUE(check_internvl_pair(tower->cfg, *model, "mmproj").ok());
}

TEST(InternvlChunks, LogitsAfterThePictureMatchLlamaCppMtmd) {
  auto ctx = tiny::context(kDir + "decoder.gguf", 512, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto tower = InternvlVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok()) << tower.message();
  ThreadPool pool(1);
  InternvlImageChunks images(*tower, m.fingerprint, &pool);
  auto img = load_image(kDir + "img_32.png");
  ASSERT_TRUE(img.ok());
  auto pic = images.image(*img);
  ASSERT_TRUE(pic.ok()) << pic.message();
  ASSERT_EQ((*pic)->n(), 16);
  const Prompt p = llama_cpp_prompt();
  const std::vector<float> want = read_f32(kDir + "llama_cpp_32_logits.f32");
  ASSERT_EQ(want.size(), size_t(m.cfg.n_vocab));
  ChunkCache& cc = ctx->cache();
  ScopedSequence s(ctx->pool());
  const int32_t nb = int32_t(p.before.size());
  ASSERT_TRUE(cc.forward_chunk(s.id(), ChunkContent::from_tokens(p.before), 0).ok());
  ASSERT_TRUE(cc.forward_chunk(s.id(), **pic, nb).ok());
  auto got = cc.forward_chunk(s.id(), ChunkContent::from_tokens(p.after), nb + (*pic)->n(),
                              LogitsMode::All);
  ASSERT_TRUE(got.ok()) << got.message();
  const size_t V = size_t(m.cfg.n_vocab);
  const float* last = got->data() + got->size() - V;
  const double rel = rel_diff(last, want.data(), V);
  std::printf("logits after the picture: kamera vs llama.cpp %.3e of the largest |logit|\n", rel);
  EXPECT_LT(rel, 1e-3);
  EXPECT_EQ(argmax(last, V), argmax(want.data(), V));
}

TEST(InternvlChunks, PictureRelocatesExactly) {
  auto ctx = tiny::context(kDir + "decoder.gguf", 1024, 16, size_t(1) << 27, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto tower = InternvlVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  ThreadPool pool(1);
  InternvlImageChunks images(*tower, m.fingerprint, &pool);
  auto img = load_image(kDir + "img_32.png");
  ASSERT_TRUE(img.ok());
  bool encoded = false;
  auto pic = images.image(*img, &encoded);
  ASSERT_TRUE(pic.ok()) << pic.message();
  EXPECT_TRUE(encoded);
  auto again = images.image(*img, &encoded);  // the same picture: the kept chunk
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(encoded);
  EXPECT_EQ(again->get(), pic->get());
  chunk_relocation::expect_relocates(*ctx, **pic, ChunkContent::from_tokens({116, 258, 10}),
                                     {0, 7, 300}, 1e-5);
}
