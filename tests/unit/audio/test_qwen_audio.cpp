// Qwen2.5-Omni's audio tower (projector type qwen2.5o) against llama.cpp d32676d's mtmd, on the
// committed tiny pair of tests/data/qwen25o (written by llama.cpp's gguf-py as its converter
// writes Qwen2.5-Omni) and its 16 kHz mono clip, so neither side resamples. llama.cpp rounds the
// convolutions' inputs to f16 (im2col in the f16 weights' type); kamera computes in f32.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "audio/audio_encoder.h"
#include "core/thread_pool.h"
#include "media/audio_decode.h"
#include "media/log_mel.h"
#include "support/idefics3_fixture.h"  // read_f32, rel_diff

using namespace kamera;
using idefics3_fixture::read_f32;
using idefics3_fixture::rel_diff;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen25o/";

std::vector<LogMel> clip_mel() {
  std::ifstream f(kDir + "clip_16k.wav", std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f),
                                   std::istreambuf_iterator<char>()};
  auto a = decode_wav(bytes, "clip_16k.wav");
  EXPECT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->sample_rate, 16000);
  return whisper_log_mel(a->samples);
}

}  // namespace

TEST(QwenAudio, LoadsTheAudioHalfOfAnOmniFile) {
  auto m = QwenAudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const QwenAudioConfig& c = m->cfg;
  EXPECT_EQ(c.projector, "qwen2.5o");
  EXPECT_EQ(c.n_mels, 128);
  EXPECT_EQ(c.dim, 32);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.ffn_dim, 48);
  EXPECT_EQ(c.out_dim, 64);
  EXPECT_EQ(c.n_pos, 1500);
  EXPECT_FLOAT_EQ(c.eps, 1e-5f);
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
  const std::vector<float> ref = read_f32(kDir + "numpy_embd.f32");
  ASSERT_EQ(ref.size(), size_t(750 * 64));
  QwenAudioEncoder enc(*m, nullptr);
  auto e = enc.encode(clip_mel(), {});
  ASSERT_TRUE(e.ok()) << e.message();
  ASSERT_EQ(e->size(), ref.size());
  const double rel = rel_diff(e->data(), ref.data(), e->size());
  std::printf("clip: kamera vs float64 numpy %.3e of the largest |value|\n", rel);
  EXPECT_LT(rel, 1e-4);
}

TEST(QwenAudio, ClipMatchesLlamaCppMtmd) {
  if (!std::ifstream(kDir + "llama_cpp.json"))
    GTEST_SKIP() << "llama.cpp's view of the clip is not in tests/data/qwen25o (its README says "
                    "how to make it)";
  auto m = QwenAudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const std::vector<LogMel> mel = clip_mel();
  ASSERT_EQ(mel.size(), 1u);  // 2 s: one 30-s window
  std::ifstream jf(kDir + "llama_cpp.json");
  const auto ref = nlohmann::json::parse(jf);
  int64_t rows = -1;
  for (const auto& c : ref["chunks"])
    if (c.contains("image")) rows = c["image"].get<int64_t>();  // mtmd_dump's media chunk
  ASSERT_EQ(rows, 750);
  const std::vector<float> embd = read_f32(kDir + "llama_cpp_embd.f32");
  ASSERT_EQ(embd.size(), size_t(750 * 64));
  ThreadPool pool(1);
  QwenAudioEncoder enc(*m, &pool);
  auto e = enc.encode(mel, {});
  ASSERT_TRUE(e.ok()) << e.message();
  ASSERT_EQ(e->size(), embd.size());
  const double rel = rel_diff(e->data(), embd.data(), e->size());
  std::printf("clip: kamera vs llama.cpp %.3e of the largest |value|\n", rel);
  EXPECT_LT(rel, 2e-3);
  // the check can fail: rows pooled in the other pairing (1-2, 3-4, ...) are far off
  auto h = enc.transformer(mel[0], {});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->size(), size_t(1500 * 32));
  std::vector<float> shifted(*e);
  std::rotate(shifted.begin(), shifted.begin() + 64, shifted.end());  // row r takes row r + 1's
  EXPECT_GT(rel_diff(shifted.data(), embd.data(), shifted.size()), 0.05);
}

TEST(QwenAudio, StopEndsTheEncode) {
  auto m = QwenAudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  QwenAudioEncoder enc(*m, nullptr);
  auto e = enc.encode(clip_mel(), [] { return true; });
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("stopped"), std::string::npos) << e.message();
  LogMel wrong{80, 3000, std::vector<float>(80 * 3000)};
  auto w = enc.encode(std::span<const LogMel>(&wrong, 1), {});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.message().find("80 mel bins"), std::string::npos) << w.message();
}
