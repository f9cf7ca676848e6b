// A Gemma 3 picture as a chunk (vision/gemma3_chunks.h) beside the committed tiny gemma3 decoder
// (tests/data/gemma3): the prompt's layout and the decoder's logits after the picture against
// llama.cpp d32676d's mtmd on the same prompt, and the picture's chunk placed anywhere from its
// canonical KV equal to a fresh prefill there.
//
// llama.cpp decodes a gemma3 picture's rows with causal attention off (mtmd_decode_use_non_causal:
// the rows see each other, as the model's own mask lets them), and so does kamera's chunk cache
// (cache/chunk_cache.h picture_rows): the logits are compared with that decode
// (llama_cpp_64_logits.f32); test_gemma3_bidir.cpp has the causal one beside it.
#include <gtest/gtest.h>

#include "support/gemma3_fixture.h"
#include "support/mtmd_reference.h"
#include "support/picture_chunks.h"
#include "support/tiny_models.h"
#include "vision/gemma3_chunks.h"

using namespace kamera;
using namespace gemma3_fixture;

namespace {

// "<bos><start_of_turn>user\n<__media__>what is the<end_of_turn>\n<start_of_turn>model\n" as
// llama.cpp's mtmd chunked it: the text before the picture (ending in <start_of_image>), after it
// (from <end_of_image>).
mtmd_reference::MtmdPrompt llama_cpp_prompt() {
  return mtmd_reference::read_mtmd_prompt(kDir + "llama_cpp_64.json");
}

}  // namespace

TEST(Gemma3Chunks, LayoutMatchesLlamaCppMtmd) {
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
  const Tokenizer& tok = *model->tokenizer;
  const VisionDelimiters d = gemma3_delimiters(&tok);
  ASSERT_EQ(d.open.size(), 1u);
  ASSERT_EQ(d.close.size(), 1u);
  const mtmd_reference::MtmdPrompt p = llama_cpp_prompt();
  // kamera's prompt: BOS, the turn's text, <start_of_image>, the rows, <end_of_image>, the rest
  // (the turn markers are pieces of their own, which a SentencePiece vocabulary does not parse
  // from text: placed as the chat template's renderer places them)
  const int32_t sot = find_piece(tok, "<start_of_turn>"), eot = find_piece(tok, "<end_of_turn>");
  auto raw = [&](std::vector<int32_t>& v, const char* s) {
    for (int32_t t : tok.encode_raw(s)) v.push_back(t);
  };
  std::vector<int32_t> before = {tok.bos(), sot};
  raw(before, "user\n");
  before.insert(before.end(), d.open.begin(), d.open.end());
  std::vector<int32_t> after = d.close;
  raw(after, "what is the");
  after.push_back(eot);
  raw(after, "\n");
  after.push_back(sot);
  raw(after, "model\n");
  EXPECT_EQ(before, p.before);
  EXPECT_EQ(after, p.after);
  auto tower = Gemma3VisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  EXPECT_EQ(p.rows, std::vector<int>{tower->cfg.rows()});
  EXPECT_TRUE(check_gemma3_pair(tower->cfg, *model, "mmproj").ok());
}

TEST(Gemma3Chunks, LogitsAfterThePictureMatchLlamaCppMtmd) {
  picture_chunks::expect_logits_after_picture<Gemma3VisionModel, Gemma3ImageChunks>(
      kDir, "img_64.png", 16, "llama_cpp_64",
      "logits after the picture: kamera vs llama.cpp (rows non-causal)");
}

TEST(Gemma3Chunks, PictureRelocatesExactly) {
  picture_chunks::expect_picture_kept_and_relocates<Gemma3VisionModel, Gemma3ImageChunks>(
      kDir, "img_64.png", ChunkContent::from_tokens({7, 302, 266}),
      [](Gemma3ImageChunks& images, const ChunkContent& pic) {
        ASSERT_EQ(images.rows(), pic.n());
      });
}
