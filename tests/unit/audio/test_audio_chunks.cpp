// A Qwen2.5-Omni audio clip as a chunk (audio/audio_chunks.h) beside the committed tiny qwen2vl
// thinker (tests/data/qwen25o): the prompt's layout and the decoder's logits after the clip
// against llama.cpp d32676d's mtmd on the same prompt (the clip's rows at M-RoPE positions
// (p, p, p) .. (p + 749, ...), as mtmd's set_position_mrope_1d and Hugging Face's get_rope_index
// place them), the clip cached by its samples (not encoded twice) and its chunk placed anywhere
// from its canonical KV equal to a fresh prefill there.
#include <gtest/gtest.h>

#include "audio/audio_chunks.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "support/audio_clips.h"
#include "support/idefics3_fixture.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen25o/";

// "<|im_start|>user\n<__media__>the<|im_end|>\n<|im_start|>assistant\n" as llama.cpp's mtmd
// chunked it: the text before the clip (ending in <|audio_bos|>), after it (from <|audio_eos|>).
audio_clips::MtmdPrompt llama_cpp_prompt() {
  return audio_clips::read_mtmd_prompt(kDir + "llama_cpp.json");
}

bool have_llama_cpp() {
  return bool(std::ifstream(kDir + "llama_cpp.json"));
}

std::vector<float> clip_samples() {
  return audio_clips::wav_samples(kDir + "clip_16k.wav");
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
  const audio_clips::MtmdPrompt p = llama_cpp_prompt();
  mtmd_reference::expect_text_around(tok, d, "<|im_start|>user\n",
                                     "the<|im_end|>\n<|im_start|>assistant\n", p);
  EXPECT_EQ(p.rows, std::vector<int>{750});
  EXPECT_EQ(qwen_audio_rows(int64_t(clip_samples().size())), p.rows[0]);
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
  audio_clips::expect_clip_logits_match<QwenAudioModel, QwenAudioChunks>(kDir, 750, 7);
}

TEST(AudioChunks, ClipIsEncodedOnceAndRelocatesExactly) {
  audio_clips::expect_clip_encoded_once_and_relocates<QwenAudioModel, QwenAudioChunks>(kDir);
}
