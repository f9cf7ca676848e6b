// An InternVL picture as a chunk (vision/internvl_chunks.h) beside the committed tiny qwen2 decoder
// (tests/data/internvl): the prompt's layout and the decoder's logits after the picture against
// llama.cpp d32676d's mtmd on the same prompt, and the picture's chunk placed anywhere from its
// canonical KV equal to a fresh prefill there. llama.cpp decodes the rows of an internvl picture
// causally, as kamera does.
#include <gtest/gtest.h>

#include "support/mtmd_reference.h"
#include "support/picture_chunks.h"
#include "support/tiny_models.h"
#include "vision/internvl_chunks.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/internvl/";

// "<|im_start|>user\n<__media__>\nthe<|im_end|>\n<|im_start|>assistant\n" as llama.cpp's mtmd
// chunked it: the text before the picture (ending in <img>), after it (from </img>).
mtmd_reference::MtmdPrompt llama_cpp_prompt() {
  return mtmd_reference::read_mtmd_prompt(kDir + "llama_cpp_32.json");
}

}  // namespace

TEST(InternvlChunks, LayoutMatchesLlamaCppMtmd) {
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
  const Tokenizer& tok = *model->tokenizer;
  const VisionDelimiters d = internvl_delimiters(&tok);
  ASSERT_EQ(d.open.size(), 1u);
  ASSERT_EQ(d.close.size(), 1u);
  const mtmd_reference::MtmdPrompt p = llama_cpp_prompt();
  mtmd_reference::expect_text_around(tok, d, "<|im_start|>user\n",
                                     "\nthe<|im_end|>\n<|im_start|>assistant\n", p);
  auto tower = InternvlVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  EXPECT_EQ(p.rows, std::vector<int>{tower->cfg.rows()});
  EXPECT_EQ(internvl_picture_rows(32, 32, tower->cfg), p.rows.at(0));
  EXPECT_EQ(internvl_picture_rows(64, 64, tower->cfg), 5 * 16);  // 2 x 2 tiles and a thumbnail
  EXPECT_TRUE(check_internvl_pair(tower->cfg, *model, "mmproj").ok());
}

TEST(InternvlChunks, LogitsAfterThePictureMatchLlamaCppMtmd) {
  picture_chunks::expect_logits_after_picture<InternvlVisionModel, InternvlImageChunks>(
      kDir, "img_32.png", 16, "llama_cpp_32", "logits after the picture: kamera vs llama.cpp");
}

TEST(InternvlChunks, PictureRelocatesExactly) {
  picture_chunks::expect_picture_kept_and_relocates<InternvlVisionModel, InternvlImageChunks>(
      kDir, "img_32.png", ChunkContent::from_tokens({116, 258, 10}));
}
