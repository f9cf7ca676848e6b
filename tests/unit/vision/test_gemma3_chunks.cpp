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

#include "cache/chunk_cache.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "support/chunk_relocation.h"
#include "support/gemma3_fixture.h"
#include "support/tiny_models.h"
#include "vision/gemma3_chunks.h"

using namespace kamera;
using namespace gemma3_fixture;

namespace {

size_t argmax(const float* v, size_t n) {
  return size_t(std::max_element(v, v + n) - v);
}

// "<bos><start_of_turn>user\n<__media__>what is the<end_of_turn>\n<start_of_turn>model\n" as
// llama.cpp's mtmd chunked it: the text before the picture (ending in <start_of_image>), after it
// (from <end_of_image>).
struct Prompt {
  std::vector<int32_t> before, after;
};

Prompt llama_cpp_prompt() {
  const std::vector<int32_t> flat = llama_cpp_flat_prompt();
  const auto at = std::find(flat.begin(), flat.end(), -1);
  return {{flat.begin(), at}, {at + 1, flat.end()}};
}

}  // namespace

TEST(Gemma3Chunks, LayoutMatchesLlamaCppMtmd) {
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
  const Tokenizer& tok = *model->tokenizer;
  const VisionDelimiters d = gemma3_delimiters(&tok);
  ASSERT_EQ(d.open.size(), 1u);
  ASSERT_EQ(d.close.size(), 1u);
  const Prompt p = llama_cpp_prompt();
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
  std::ifstream jf(kDir + "llama_cpp_64.json");
  const auto ref = nlohmann::json::parse(jf);
  auto tower = Gemma3VisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  EXPECT_EQ(ref["chunks"][1]["image"].get<int>(), tower->cfg.rows());
  EXPECT_TRUE(check_gemma3_pair(tower->cfg, *model, "mmproj").ok());
}

TEST(Gemma3Chunks, LogitsAfterThePictureMatchLlamaCppMtmd) {
  auto ctx = tiny::context(kDir + "decoder.gguf", 512, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto tower = Gemma3VisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok()) << tower.message();
  ThreadPool pool(1);
  Gemma3ImageChunks images(*tower, m.fingerprint, &pool);
  auto img = load_image(kDir + "img_64.png");
  ASSERT_TRUE(img.ok());
  auto pic = images.image(*img);
  ASSERT_TRUE(pic.ok()) << pic.message();
  ASSERT_EQ((*pic)->n(), 16);
  const Prompt p = llama_cpp_prompt();
  const std::vector<float> want = read_f32(kDir + "llama_cpp_64_logits.f32");
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
  std::printf(
      "logits after the picture: kamera vs llama.cpp (rows non-causal) %.3e of the largest "
      "|logit|\n",
      rel);
  EXPECT_LT(rel, 1e-3);
  EXPECT_EQ(argmax(last, V), argmax(want.data(), V));
}

TEST(Gemma3Chunks, PictureRelocatesExactly) {
  auto ctx = tiny::context(kDir + "decoder.gguf", 1024, 16, size_t(1) << 27, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto tower = Gemma3VisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  ThreadPool pool(1);
  Gemma3ImageChunks images(*tower, m.fingerprint, &pool);
  auto img = load_image(kDir + "img_64.png");
  ASSERT_TRUE(img.ok());
  bool encoded = false;
  auto pic = images.image(*img, &encoded);
  ASSERT_TRUE(pic.ok()) << pic.message();
  EXPECT_TRUE(encoded);
  ASSERT_EQ(images.rows(), (*pic)->n());
  auto again = images.image(*img, &encoded);  // the same picture: the kept chunk
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(encoded);
  EXPECT_EQ(again->get(), pic->get());
  chunk_relocation::expect_relocates(*ctx, **pic, ChunkContent::from_tokens({7, 302, 266}),
                                     {0, 7, 300}, 1e-5);
}
