// A SmolVLM picture as a chunk (vision/idefics3_chunks.h) beside the committed tiny llama decoder
// (tests/data/idefics3): the decoder's logits after the picture against llama.cpp d32676d's mtmd
// on the same prompt, and the picture's chunk placed anywhere from its canonical KV equal to a
// fresh prefill there.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cache/chunk_cache.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "support/chunk_relocation.h"
#include "support/idefics3_fixture.h"
#include "support/tiny_models.h"
#include "vision/idefics3_chunks.h"

using namespace kamera;
using namespace idefics3_fixture;

namespace {

struct Prompt {
  std::vector<int32_t> before, after;  // llama.cpp's text around the picture
  std::vector<float> logits;           // llama.cpp's, at the prompt's last row
};

// "<|im_start|>User:<__media__>the<end_of_utterance>" as llama.cpp's mtmd chunked it: the
// picture runs from the first <fake_token_around_image> to the one after the last image chunk.
Prompt llama_cpp_prompt(int32_t fake) {
  std::ifstream jf(kDir + "llama_cpp_144x96.json");
  const auto ref = nlohmann::json::parse(jf);
  std::vector<int32_t> flat;
  for (const auto& c : ref["chunks"])
    if (c.contains("image"))
      flat.push_back(-1);
    else
      for (int32_t t : c["text"]) flat.push_back(t);
  Prompt p;
  const auto first = std::find(flat.begin(), flat.end(), fake);
  const auto last = std::find(flat.rbegin(), flat.rend(), -1).base();  // past the last image
  p.before.assign(flat.begin(), first);
  p.after.assign(last + 1, flat.end());
  p.logits = read_f32(kDir + "llama_cpp_144x96_logits.f32");
  return p;
}

// The picture's chunk from kamera's tiles and, for the global image, llama.cpp's overview
// pixels (llama.cpp resizes it bilinearly where the processor uses Lanczos).
ChunkContent llama_cpp_picture(const Model& decoder) {
  auto tower = Idefics3VisionModel::load(kDir + "mmproj.gguf");
  EXPECT_TRUE(tower.ok()) << tower.message();
  auto tokens = Idefics3TokenRows::from(decoder);
  EXPECT_TRUE(tokens.ok()) << tokens.message();
  auto img = load_image(kDir + "img_144x96.png");
  EXPECT_TRUE(img.ok());
  auto tiles = idefics3_preprocess(*img, tower->cfg);
  EXPECT_TRUE(tiles.ok());
  tiles->tiles.back() = bilinear_corners(*img, 48, 48);
  ThreadPool pool(1);
  Idefics3VisionEncoder enc(*tower, &pool);
  std::vector<std::vector<float>> rows;
  for (const Image& t : tiles->tiles) rows.push_back(*enc.encode(t));
  auto layout = idefics3_layout(tiles->grid, tokens->vocab);
  EXPECT_TRUE(layout.ok());
  auto c = idefics3_picture_chunk(*layout, rows, *tokens);
  EXPECT_TRUE(c.ok()) << c.message();
  return std::move(*c);
}

size_t argmax(const float* v, size_t n) {
  return size_t(std::max_element(v, v + n) - v);
}

}  // namespace

TEST(Idefics3Chunks, LogitsAfterThePictureMatchLlamaCppMtmd) {
  auto ctx = tiny::context(kDir + "decoder.gguf", 512, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  const ChunkContent pic = llama_cpp_picture(m);
  ASSERT_EQ(pic.n(), 7 * 16 + 17);
  const Prompt p = llama_cpp_prompt(Idefics3TokenRows::from(m)->vocab.fake);
  ASSERT_EQ(p.logits.size(), size_t(m.cfg.n_vocab));
  ChunkCache& cc = ctx->cache();
  ScopedSequence s(ctx->pool());
  const int32_t nb = int32_t(p.before.size());
  ASSERT_TRUE(cc.forward_chunk(s.id(), ChunkContent::from_tokens(p.before), 0).ok());
  ASSERT_TRUE(cc.forward_chunk(s.id(), pic, nb).ok());
  auto got =
      cc.forward_chunk(s.id(), ChunkContent::from_tokens(p.after), nb + pic.n(), LogitsMode::All);
  ASSERT_TRUE(got.ok()) << got.message();
  const size_t V = size_t(m.cfg.n_vocab);
  const float* last = got->data() + got->size() - V;
  const double rel = rel_diff(last, p.logits.data(), V);
  std::printf("logits after the picture: kamera vs llama.cpp %.3e of the largest |logit|\n", rel);
  EXPECT_LT(rel, 1e-3);
  EXPECT_EQ(argmax(last, V), argmax(p.logits.data(), V));
}

TEST(Idefics3Chunks, PictureRelocatesExactly) {
  auto ctx = tiny::context(kDir + "decoder.gguf", 1024, 16, size_t(1) << 27, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto tower = Idefics3VisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  auto tokens = Idefics3TokenRows::from(m);
  ASSERT_TRUE(tokens.ok());
  ThreadPool pool(1);
  Idefics3ImageChunks images(*tower, std::move(*tokens), m.fingerprint, &pool);
  auto img = load_image(kDir + "img_144x96.png");
  ASSERT_TRUE(img.ok());
  bool encoded = false;
  auto pic = images.image(*img, &encoded);
  ASSERT_TRUE(pic.ok()) << pic.message();
  EXPECT_TRUE(encoded);
  ASSERT_EQ(images.rows(img->width, img->height).value(), (*pic)->n());
  auto again = images.image(*img, &encoded);  // the same picture: the kept chunk
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(encoded);
  EXPECT_EQ(again->get(), pic->get());
  chunk_relocation::expect_relocates(*ctx, **pic, ChunkContent::from_tokens({116, 258, 268}),
                                     {0, 7, 300}, 1e-5);
}
