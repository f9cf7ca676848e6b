// A LLaVA-1.5 picture as a chunk (vision/llava_chunks.h) beside the committed tiny llama decoder
// (tests/data/llava): the prompt's layout and the decoder's logits after the picture against
// llama.cpp d32676d's mtmd on the same prompt, and the picture's chunk placed anywhere from its
// canonical KV equal to a fresh prefill there. llama.cpp decodes the rows of an mlp picture
// causally, as kamera does.
#include <gtest/gtest.h>

#include "support/idefics3_fixture.h"  // read_f32, rel_diff
#include "support/mtmd_reference.h"
#include "support/picture_chunks.h"
#include "support/tiny_models.h"
#include "vision/llava_chunks.h"

using namespace kamera;
using idefics3_fixture::read_f32;
using idefics3_fixture::rel_diff;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/llava/";

// "USER: <__media__>\nthe ASSISTANT:" as llama.cpp's mtmd chunked it.
mtmd_reference::MtmdPrompt llama_cpp_prompt() {
  return mtmd_reference::read_mtmd_prompt(kDir + "llama_cpp_32.json");
}

}  // namespace

TEST(LlavaChunks, LayoutMatchesLlamaCppMtmd) {
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
  const Tokenizer& tok = *model->tokenizer;
  const mtmd_reference::MtmdPrompt p = llama_cpp_prompt();
  EXPECT_EQ(tok.encode("USER: ", false), p.before);           // no token before the rows
  EXPECT_EQ(tok.encode("\nthe ASSISTANT:", false), p.after);  // nor after them
  auto tower = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  EXPECT_EQ(p.rows, std::vector<int>{tower->cfg.rows()});
  EXPECT_TRUE(check_llava_pair(tower->cfg, *model, "mmproj").ok());
  auto other = tiny::load(tiny::model_path("qwen2vl"));
  ASSERT_TRUE(other);
  EXPECT_FALSE(check_llava_pair(tower->cfg, *other, "mmproj").ok());
}

TEST(LlavaChunks, LogitsAfterThePictureMatchLlamaCppMtmd) {
  picture_chunks::expect_logits_after_picture<LlavaVisionModel, LlavaImageChunks>(
      kDir, "img_32.png", 64, "llama_cpp_32", "logits after the picture: kamera vs llama.cpp");
}

TEST(LlavaChunks, PictureRelocatesExactly) {
  picture_chunks::expect_picture_kept_and_relocates<LlavaVisionModel, LlavaImageChunks>(
      kDir, "img_32.png", ChunkContent::from_tokens({116, 258, 10}));
}

// A wide picture is padded to a square with CLIP's mean colour, centred, then resized.
TEST(LlavaChunks, WidePictureIsPaddedWithTheMeanColour) {
  auto tower = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  Image img;
  img.width = 32, img.height = 16;
  img.rgb.assign(32 * 16 * 3, 10);
  auto sq = llava_square(img, tower->cfg);
  ASSERT_TRUE(sq.ok()) << sq.message();
  ASSERT_EQ(sq->width, 32);
  ASSERT_EQ(sq->height, 32);
  for (int y : {0, 7, 24, 31})
    EXPECT_EQ(std::vector<uint8_t>(sq->at(5, y), sq->at(5, y) + 3),
              (std::vector<uint8_t>{122, 116, 104}));
  for (int y : {8, 16, 23}) EXPECT_EQ(*sq->at(5, y), 10);
}

// Pictures that are not square: kamera pads, then resizes (LLaVA's expand2square); llama.cpp
// resizes to fit, then pads, with its own bicubic. Measured, not matched: the rows stay within the
// same order of magnitude but are not llama.cpp's.
TEST(LlavaChunks, NonSquarePicturesDepartFromLlamaCppByTheirPreprocessing) {
  auto tower = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  LlavaVisionEncoder enc(*tower, nullptr);
  for (const char* f : {"48x24", "20x36"}) {
    auto img = load_image(kDir + "img_" + f + ".png");
    ASSERT_TRUE(img.ok());
    auto sq = llava_square(*img, tower->cfg);
    ASSERT_TRUE(sq.ok()) << sq.message();
    auto e = enc.encode(*sq);
    ASSERT_TRUE(e.ok()) << e.message();
    const std::vector<float> want = read_f32(kDir + "llama_cpp_" + f + "_embd.f32");
    ASSERT_EQ(e->size(), want.size());
    const double rel = rel_diff(e->data(), want.data(), want.size());
    std::printf("%s: kamera vs llama.cpp %.3e of the largest |value|\n", f, rel);
    EXPECT_GT(rel, 2e-3);  // not llama.cpp's pixels
    EXPECT_LT(rel, 0.5);   // the same picture
  }
}
