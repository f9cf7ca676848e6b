// Qwen2.5-Omni's audio tower (projector type qwen2.5o) against llama.cpp d32676d's mtmd, on the
// committed tiny pair of tests/data/qwen25o (written by llama.cpp's gguf-py as its converter
// writes Qwen2.5-Omni) and its 16 kHz mono clip, so neither side resamples. llama.cpp rounds the
// convolutions' inputs to f16 (im2col in the f16 weights' type); kamera computes in f32.
#include <gtest/gtest.h>

#include <fstream>

#include "audio/audio_encoder.h"
#include "core/thread_pool.h"
#include "media/log_mel.h"
#include "support/audio_clips.h"
#include "support/audio_towers.h"
#include "support/mtmd_reference.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen25o/";

std::vector<LogMel> clip_mel() {
  return whisper_log_mel(audio_clips::wav_samples(kDir + "clip_16k.wav"));
}

}  // namespace

TEST(QwenAudio, LoadsTheAudioHalfOfAnOmniFile) {
  auto m = QwenAudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const QwenAudioConfig& c = m->cfg;
  EXPECT_EQ(c.projector, "qwen2.5o");
  audio_towers::expect_tiny_tower_shape(c);
  EXPECT_EQ(m->w.conv1.w.type(), GgmlType::F16);  // as the converter forces them
  EXPECT_EQ(QwenAudioConfig::rows(3000), 750);
  // a vision-only tower and a decoder are refused by name
  auto gemma =
      QwenAudioModel::load(std::string(KAMERA_SOURCE_DIR) + "/tests/data/gemma3/mmproj.gguf");
  ASSERT_FALSE(gemma.ok());
  EXPECT_NE(gemma.message().find("no audio encoder"), std::string::npos) << gemma.message();
  EXPECT_FALSE(QwenAudioModel::load(kDir + "decoder.gguf").ok());
}

TEST(QwenAudio, ClipMatchesFloat64Numpy) {
  // tests/data/qwen25o/numpy_audio.py: Hugging Face's encoder in float64 on the same mel
  auto m = QwenAudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  audio_towers::expect_rows_match<QwenAudioEncoder>(*m, nullptr, clip_mel(),
                                                    kDir + "numpy_embd.f32", 750 * 64, 1e-4,
                                                    "clip: kamera vs float64 numpy");
}

TEST(QwenAudio, ClipMatchesLlamaCppMtmd) {
  if (!std::ifstream(kDir + "llama_cpp.json"))
    GTEST_SKIP() << "llama.cpp's view of the clip is not in tests/data/qwen25o (its README says "
                    "how to make it)";
  auto m = QwenAudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const std::vector<LogMel> mel = clip_mel();
  ASSERT_EQ(mel.size(), 1u);  // 2 s: one 30-s window
  // mtmd_dump's media chunk
  ASSERT_EQ(mtmd_reference::read_mtmd_prompt(kDir + "llama_cpp.json").rows, std::vector<int>{750});
  ThreadPool pool(1);
  std::vector<float> rows;
  ASSERT_NO_FATAL_FAILURE(audio_towers::expect_rows_match<QwenAudioEncoder>(
      *m, &pool, mel, kDir + "llama_cpp_embd.f32", 750 * 64, 2e-3, "clip: kamera vs llama.cpp",
      &rows));
  // the check can fail: rows pooled in the other pairing (1-2, 3-4, ...) are far off
  QwenAudioEncoder enc(*m, &pool);
  auto h = enc.transformer(mel[0], {});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->size(), size_t(1500 * 32));
  // row r takes row r + 1's
  audio_towers::expect_shifted_rows_differ(rows, kDir + "llama_cpp_embd.f32", 64, 0.05);
}

TEST(QwenAudio, StopEndsTheEncode) {
  auto m = QwenAudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  QwenAudioEncoder enc(*m, nullptr);
  audio_towers::expect_stop_and_mel_bins_refused(enc, clip_mel(), 3000);
}
