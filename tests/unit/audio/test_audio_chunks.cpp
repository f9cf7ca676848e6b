// A Qwen2.5-Omni audio clip as a chunk (audio/audio_chunks.h) beside the committed tiny qwen2vl
// thinker (tests/data/qwen25o): the prompt's layout and the decoder's logits after the clip
// against llama.cpp d32676d's mtmd on the same prompt (the clip's rows at M-RoPE positions
// (p, p, p) .. (p + 749, ...), as mtmd's set_position_mrope_1d and Hugging Face's get_rope_index
// place them), the clip cached by its samples (not encoded twice) and its chunk placed anywhere
// from its canonical KV equal to a fresh prefill there.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "audio/audio_chunks.h"
#include "cache/chunk_cache.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "media/audio_decode.h"
#include "support/chunk_relocation.h"
#include "support/idefics3_fixture.h"
#include "support/tiny_models.h"

using namespace kamera;
using idefics3_fixture::read_f32;
using idefics3_fixture::rel_diff;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen25o/";

size_t argmax(const float* v, size_t n) {
  return size_t(std::max_element(v, v + n) - v);
}

// "<|im_start|>user\n<__media__>the<|im_end|>\n<|im_start|>assistant\n" as llama.cpp's mtmd
// chunked it: the text before the clip (ending in <|audio_bos|>), after it (from <|audio_eos|>).
struct Prompt {
  std::vector<int32_t> before, after;
  int rows = 0;
};

Prompt llama_cpp_prompt() {
  std::ifstream jf(kDir + "llama_cpp.json");
  const auto ref = nlohmann::json::parse(jf);
  Prompt p;
  bool seen = false;
  for (const auto& c : ref["chunks"]) {
    if (c.contains("image")) {  // mtmd_dump writes every media chunk so
      p.rows = c["image"].get<int>();
      seen = true;
      continue;
    }
    for (int32_t t : c["text"]) (seen ? p.after : p.before).push_back(t);
  }
  return p;
}

bool have_llama_cpp() {
  return bool(std::ifstream(kDir + "llama_cpp.json"));
}

std::vector<float> clip_samples() {
  std::ifstream f(kDir + "clip_16k.wav", std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f),
                                   std::istreambuf_iterator<char>()};
  auto a = decode_wav(bytes, "clip_16k.wav");
  EXPECT_TRUE(a.ok()) << a.message();
  return a.ok() ? a->samples : std::vector<float>{};
}

}  // namespace

TEST(AudioChunks, LayoutMatchesLlamaCppMtmd) {
  if (!have_llama_cpp())
    GTEST_SKIP() << "llama.cpp's view of the clip is not in tests/data/qwen25o (its README says "
                    "how to make it)";
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
  const Tokenizer& tok = *model->tokenizer;
  const VisionDelimiters d = audio_delimiters(&tok);
  ASSERT_EQ(d.open.size(), 1u);
  ASSERT_EQ(d.close.size(), 1u);
  const Prompt p = llama_cpp_prompt();
  auto enc = [&](const char* s) { return tok.encode(s, false); };
  std::vector<int32_t> before = enc("<|im_start|>user\n");
  before.insert(before.end(), d.open.begin(), d.open.end());
  std::vector<int32_t> after = d.close;
  for (int32_t t : enc("the<|im_end|>\n<|im_start|>assistant\n")) after.push_back(t);
  EXPECT_EQ(before, p.before);
  EXPECT_EQ(after, p.after);
  EXPECT_EQ(p.rows, 750);
  EXPECT_EQ(qwen_audio_rows(int64_t(clip_samples().size())), p.rows);
  // llama.cpp d32676d's mtmd on clips of 479839 and 479840 samples (just under 30 s): one and two
  // audio chunks of 750 rows (tests/data/qwen25o/README.md, "Where a second window starts").
  EXPECT_EQ(qwen_audio_rows(479839), 750);
  EXPECT_EQ(qwen_audio_rows(479840), 2 * 750);
  EXPECT_EQ(qwen_audio_rows(16000 * 31), 2 * 750);
  auto tower = QwenAudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  EXPECT_TRUE(check_qwen_audio_pair(tower->cfg, *model, "mmproj").ok());
  auto other = tiny::load(std::string(KAMERA_SOURCE_DIR) + "/tests/data/internvl/decoder.gguf");
  ASSERT_TRUE(other);
  const Status wrong = check_qwen_audio_pair(tower->cfg, *other, "mmproj");
  EXPECT_NE(wrong.message().find("needs a qwen2vl decoder"), std::string::npos) << wrong.message();
}

TEST(AudioChunks, LogitsAfterTheClipMatchLlamaCppMtmd) {
  if (!have_llama_cpp())
    GTEST_SKIP() << "llama.cpp's view of the clip is not in tests/data/qwen25o (its README says "
                    "how to make it)";
  auto ctx = tiny::context(kDir + "decoder.gguf", 1024, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto tower = QwenAudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok()) << tower.message();
  ThreadPool pool(1);
  QwenAudioChunks clips(*tower, m.fingerprint, &pool);
  auto clip = clips.clip(clip_samples());
  ASSERT_TRUE(clip.ok()) << clip.message();
  ASSERT_EQ((*clip)->n(), 750);
  EXPECT_EQ((*clip)->layout[7], Pos::linear(7));  // t = h = w
  const Prompt p = llama_cpp_prompt();
  const std::vector<float> want = read_f32(kDir + "llama_cpp_logits.f32");
  ASSERT_EQ(want.size(), size_t(m.cfg.n_vocab));
  ChunkCache& cc = ctx->cache();
  ScopedSequence s(ctx->pool());
  const int32_t nb = int32_t(p.before.size());
  ASSERT_TRUE(cc.forward_chunk(s.id(), ChunkContent::from_tokens(p.before), 0).ok());
  ASSERT_TRUE(cc.forward_chunk(s.id(), **clip, nb).ok());
  auto got = cc.forward_chunk(s.id(), ChunkContent::from_tokens(p.after), nb + (*clip)->n(),
                              LogitsMode::All);
  ASSERT_TRUE(got.ok()) << got.message();
  const size_t V = size_t(m.cfg.n_vocab);
  const float* last = got->data() + got->size() - V;
  const double rel = rel_diff(last, want.data(), V);
  std::printf("logits after the clip: kamera vs llama.cpp %.3e of the largest |logit|\n", rel);
  EXPECT_LT(rel, 1e-3);
  EXPECT_EQ(argmax(last, V), argmax(want.data(), V));
}

TEST(AudioChunks, ClipIsEncodedOnceAndRelocatesExactly) {
  auto ctx = tiny::context(kDir + "decoder.gguf", 4096, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto tower = QwenAudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  ThreadPool pool(1);
  QwenAudioChunks clips(*tower, m.fingerprint, &pool);
  const std::vector<float> samples = clip_samples();
  bool encoded = false;
  auto clip = clips.clip(samples, &encoded);
  ASSERT_TRUE(clip.ok()) << clip.message();
  EXPECT_TRUE(encoded);
  auto again = clips.clip(samples, &encoded);  // the same samples: the kept chunk
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(encoded);
  EXPECT_EQ(again->get(), clip->get());
  std::vector<float> other = samples;
  other[100] += 0.01f;  // one sample changed: another clip, encoded
  auto third = clips.clip(other, &encoded);
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(encoded);
  EXPECT_NE((*third)->embeddings, (*clip)->embeddings);
  chunk_relocation::expect_relocates(*ctx, **clip, ChunkContent::from_tokens({7, 262, 266}),
                                     {0, 9, 1200}, 1e-5);
}
