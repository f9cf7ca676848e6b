// Qwen3-Omni / Qwen3-ASR's audio tower (audio projector type qwen3a) on the committed tiny file of
// tests/data/qwen3a (written by llama.cpp's gguf-py as its converter writes Qwen3-ASR) and its
// 8.5-s 16 kHz mono clip (851 mel frames: windows of 800 and 51 frames, 9 chunks, 117 rows),
// against float64 numpy (tests/data/qwen3a/numpy_qwen3a.py) and llama.cpp d32676d's mtmd.
// llama.cpp rounds the convolutions' and conv_out's inputs to f16 (im2col and products in the
// f16 weights' type); kamera computes in f32.
#include <gtest/gtest.h>

#include "audio/qwen3_audio_encoder.h"
#include "core/thread_pool.h"
#include "support/audio_clips.h"
#include "support/audio_towers.h"
#include "support/gguf_copy.h"
#include "support/mtmd_reference.h"
#include "support/temp_path.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen3a/";

std::vector<float> clip_samples() {
  return audio_clips::wav_samples(kDir + "clip_16k.wav");
}

}  // namespace

TEST(Qwen3Audio, LoadsTheAsrFile) {
  auto m = Qwen3AudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const Qwen3AudioConfig& c = m->cfg;
  EXPECT_EQ(c.projector, "qwen3a");
  audio_towers::expect_tiny_tower_shape(c);
  EXPECT_EQ(c.conv_ch, 8);
  EXPECT_TRUE(c.k_bias);
  EXPECT_EQ(c.conv_out_in(), 8 * 16);
  EXPECT_EQ(Qwen3AudioConfig::chunk_rows(), 13);
  EXPECT_EQ(m->w.conv1.w.type(), GgmlType::F16);  // as the converter forces ".conv" weights
  EXPECT_EQ(m->w.conv_out.w.type(), GgmlType::F16);
  EXPECT_EQ(m->w.mlp2.out, 64);
  // the clip: 136000 samples, 851 frames: a window of 800 and one of 51, padded to 100
  const std::vector<LogMel> w = qwen3_audio_windows(clip_samples(), c.n_mels);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].n_frames, 800);
  EXPECT_EQ(w[1].n_frames, 100);
  EXPECT_EQ(w[1].data[51], 0.0f);  // padding, after the scaling
  EXPECT_NE(w[1].data[50], 0.0f);  // the clip's last frame (850)
  EXPECT_EQ(qwen3_audio_rows(136000), 8 * 13 + 13);
  EXPECT_EQ(qwen3_audio_rows(16000 * 8 - 1), 8 * 13);         // 800 frames: one whole window
  EXPECT_EQ(qwen3_audio_rows(16000 * 8), 8 * 13 + 13);        // 801 frames: a chunk more
  EXPECT_EQ(qwen3_audio_rows(15999), 13);                     // 100 frames
  EXPECT_EQ(qwen3_audio_rows(16000), 2 * 13);                 // 101 frames
  EXPECT_EQ(qwen3_audio_rows(16000 * 30), 3 * 104 + 7 * 13);  // 3001 frames
  for (int64_t n : {int64_t(1), int64_t(15999), int64_t(16000), int64_t(127999), int64_t(136000),
                    int64_t(16000 * 20)}) {
    int64_t rows = 0;
    for (const LogMel& x : qwen3_audio_windows(std::vector<float>(size_t(n), 0.01f), 128))
      rows += x.n_frames / 100 * 13;
    EXPECT_EQ(qwen3_audio_rows(n), rows) << n;
  }
}

TEST(Qwen3Audio, OtherFilesAreRefusedByName) {
  const std::string src = std::string(KAMERA_SOURCE_DIR) + "/tests/data/";
  auto refused = [](const std::string& path) {
    auto m = Qwen3AudioModel::load(path);
    EXPECT_FALSE(m.ok()) << path;
    return m.ok() ? std::string() : m.message();
  };
  EXPECT_NE(refused(src + "qwen25o/mmproj.gguf").find("audio projector type 'qwen2.5o'"),
            std::string::npos);
  EXPECT_NE(refused(src + "gemma3/mmproj.gguf").find("no audio encoder"), std::string::npos);
  EXPECT_NE(refused(kDir + "decoder.gguf").find("not an mmproj"), std::string::npos);
  // and the Qwen2.5-Omni loader refuses this file by its type
  auto q25 = QwenAudioModel::load(kDir + "mmproj.gguf");
  ASSERT_FALSE(q25.ok());
  EXPECT_NE(q25.message().find("'qwen3a'"), std::string::npos) << q25.message();
}

TEST(Qwen3Audio, MalformedFilesAreRefusedByName) {
  const std::string to = unique_temp("kamera-qwen3a-bad.gguf");
  auto refused = [&](const std::function<void(GgufWriter&)>& set,
                     const std::vector<std::pair<std::string, std::vector<int64_t>>>& extra = {}) {
    tiny::copy_gguf(kDir + "mmproj.gguf", to, set, extra);
    auto m = Qwen3AudioModel::load(to);
    EXPECT_FALSE(m.ok());
    return m.ok() ? std::string() : m.message();
  };
  const auto none = [](GgufWriter&) {};
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_u32("clip.audio.block_count", 3);
            }).find("tensor a.blk.2.ln1.weight is missing"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_u32("clip.audio.embedding_length", 36);
            }).find("tensor a.conv_out.weight has shape"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_u32("clip.audio.attention.head_count", 5);
            }).find("width 32 with 5 heads"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_u32("clip.audio.num_mel_bins", 80);
            }).find("tensor a.conv_out.weight has shape"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_string("clip.audio.projector_type", "qwen2a");
            }).find("audio projector type 'qwen2a'"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_bool("clip.has_audio_encoder", false);
            }).find("no audio encoder"),
            std::string::npos);
  EXPECT_NE(refused(none, {{"a.blk.0.attn_sinks", {4}}}).find("kamera would ignore"),
            std::string::npos);
  std::remove(to.c_str());
}

TEST(Qwen3Audio, ClipMatchesFloat64Numpy) {
  auto m = Qwen3AudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  audio_towers::expect_rows_match<Qwen3AudioEncoder>(
      *m, nullptr, qwen3_audio_windows(clip_samples(), 128), kDir + "numpy_embd.f32", 117 * 64,
      1e-4, "clip: kamera vs float64 numpy");
}

TEST(Qwen3Audio, ClipMatchesLlamaCppMtmd) {
  auto m = Qwen3AudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  // mtmd: one audio chunk per window, 104 and 13 rows
  EXPECT_EQ(mtmd_reference::read_mtmd_prompt(kDir + "llama_cpp.json").rows,
            (std::vector<int>{104, 13}));
  ThreadPool pool(1);
  std::vector<float> rows;
  ASSERT_NO_FATAL_FAILURE(audio_towers::expect_rows_match<Qwen3AudioEncoder>(
      *m, &pool, qwen3_audio_windows(clip_samples(), 128), kDir + "llama_cpp_embd.f32", 117 * 64,
      2e-3, "clip: kamera vs llama.cpp", &rows));
  // the check can fail: rows one chunk later (row r takes row r + 13's) are far off
  audio_towers::expect_shifted_rows_differ(rows, kDir + "llama_cpp_embd.f32", 13 * 64, 10 * 2e-3);
}

TEST(Qwen3Audio, StopEndsTheEncode) {
  auto m = Qwen3AudioModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  Qwen3AudioEncoder enc(*m, nullptr);
  audio_towers::expect_stop_and_mel_bins_refused(enc, qwen3_audio_windows(clip_samples(), 128),
                                                 100);
  LogMel long_window{128, 900, std::vector<float>(128 * 900)};  // nine chunks attending together
  auto l = enc.encode(std::span<const LogMel>(&long_window, 1), {});
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.message().find("over the 800"), std::string::npos) << l.message();
  LogMel ragged{128, 150, std::vector<float>(128 * 150)};
  auto r = enc.encode(std::span<const LogMel>(&ragged, 1), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("whole chunks of 100"), std::string::npos) << r.message();
}
