// A SmolVLM picture as a chunk (vision/idefics3_chunks.h) beside the committed tiny llama decoder
// (tests/data/idefics3): the decoder's logits after the picture against llama.cpp d32676d's mtmd
// on the same prompt, and the picture's chunk placed anywhere from its canonical KV equal to a
// fresh prefill there.
#include <gtest/gtest.h>

#include "cache/chunk_cache.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "support/idefics3_fixture.h"
#include "support/mtmd_reference.h"
#include "support/picture_chunks.h"
#include "support/tiny_models.h"
#include "vision/idefics3_chunks.h"

using namespace kamera;
using namespace idefics3_fixture;

namespace {

// "<|im_start|>User:<__media__>the<end_of_utterance>" as llama.cpp's mtmd chunked it: the
// picture runs from the first <fake_token_around_image> to the one after the last image chunk.
mtmd_reference::MtmdPrompt llama_cpp_prompt(int32_t fake) {
  const std::vector<int32_t> flat =
      mtmd_reference::read_flat_prompt(kDir + "llama_cpp_144x96.json");
  mtmd_reference::MtmdPrompt p;
  const auto first = std::find(flat.begin(), flat.end(), fake);
  const auto last = std::find(flat.rbegin(), flat.rend(), -1).base();  // past the last image
  p.before.assign(flat.begin(), first);
  p.after.assign(last + 1, flat.end());
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

}  // namespace

TEST(Idefics3Chunks, LogitsAfterThePictureMatchLlamaCppMtmd) {
  auto ctx = tiny::context(kDir + "decoder.gguf", 512, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  const ChunkContent pic = llama_cpp_picture(m);
  ASSERT_EQ(pic.n(), 7 * 16 + 17);
  mtmd_reference::expect_logits_after(
      *ctx, llama_cpp_prompt(Idefics3TokenRows::from(m)->vocab.fake), pic,
      kDir + "llama_cpp_144x96_logits.f32", "logits after the picture: kamera vs llama.cpp");
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
  picture_chunks::expect_kept_and_relocates(
      *ctx, images, *img, ChunkContent::from_tokens({116, 258, 268}), [&](const ChunkContent& pic) {
        ASSERT_EQ(images.rows(img->width, img->height).value(), pic.n());
      });
}
