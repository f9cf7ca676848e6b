// A Qwen3-ASR audio clip as a chunk (audio/audio_chunks.h) beside the committed tiny qwen3vl
// thinker (tests/data/qwen3a): the prompt's layout and the decoder's logits after the clip
// against llama.cpp d32676d's mtmd on the same prompt (the clip's two windows are two audio
// chunks back to back there, one chunk of 117 rows here, on the same positions (p, p, p) ..
// (p + 116, ...), as mtmd's set_position_mrope_1d places them), the clip cached by its samples
// (not encoded twice) and its chunk placed anywhere from its canonical KV equal to a fresh
// prefill there.
#include <gtest/gtest.h>

#include "audio/audio_chunks.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "support/audio_clips.h"
#include "support/idefics3_fixture.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen3a/";

// "<|im_start|>user\n<__media__>the<|im_end|>\n<|im_start|>assistant\n" as llama.cpp's mtmd
// chunked it: the text before the clip (ending in <|audio_start|>), after it (from <|audio_end|>),
// the rows of its two audio chunks.
audio_clips::MtmdPrompt llama_cpp_prompt() {
  return audio_clips::read_mtmd_prompt(kDir + "llama_cpp.json");
}

std::vector<float> clip_samples() {
  return audio_clips::wav_samples(kDir + "clip_16k.wav");
}

}  // namespace

TEST(Qwen3AudioChunks, LayoutMatchesLlamaCppMtmd) {
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
  EXPECT_EQ(model->cfg.arch, Arch::Qwen3Vl);
  const Tokenizer& tok = *model->tokenizer;
  const VisionDelimiters d = qwen3_audio_delimiters(&tok);
  ASSERT_EQ(d.open.size(), 1u);
  ASSERT_EQ(d.close.size(), 1u);
  EXPECT_TRUE(audio_delimiters(&tok).empty());  // no <|audio_bos|> in Qwen3's vocabulary
  const audio_clips::MtmdPrompt p = llama_cpp_prompt();
  mtmd_reference::expect_text_around(tok, d, "<|im_start|>user\n",
                                     "the<|im_end|>\n<|im_start|>assistant\n", p);
  EXPECT_EQ(p.rows, (std::vector<int>{104, 13}));
  EXPECT_EQ(qwen3_audio_rows(int64_t(clip_samples().size())), 104 + 13);
  auto tower = Qwen3AudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok());
  EXPECT_TRUE(check_qwen3_audio_pair(tower->cfg, *model, "mmproj").ok());
  // Qwen2.5-Omni's thinker (qwen2vl) is not this tower's decoder, nor is a qwen2 one
  for (const char* other : {"qwen25o/decoder.gguf", "internvl/decoder.gguf"}) {
    auto o = tiny::load(std::string(KAMERA_SOURCE_DIR) + "/tests/data/" + other);
    ASSERT_TRUE(o);
    const Status wrong = check_qwen3_audio_pair(tower->cfg, *o, "mmproj");
    EXPECT_NE(wrong.message().find("needs a qwen3vl or qwen3vlmoe decoder"), std::string::npos)
        << wrong.message();
  }
}

TEST(Qwen3AudioChunks, LogitsAfterTheClipMatchLlamaCppMtmd) {
  // t = h = w, across the two windows
  audio_clips::expect_clip_logits_match<Qwen3AudioModel, Qwen3AudioChunks>(kDir, 117, 110);
}

TEST(Qwen3AudioChunks, ClipIsEncodedOnceAndRelocatesExactly) {
  audio_clips::expect_clip_encoded_once_and_relocates<Qwen3AudioModel, Qwen3AudioChunks>(kDir);
}
