// `kamera vision-embed --audio`, the audio twin of vision-embed: the tiny Qwen2.5-Omni mmproj of
// tests/data/qwen25o on its clip gives the rows tests/data/qwen25o/numpy_audio.py computes in
// float64 (Hugging Face's front end and encoder, independent of kamera); the clip as FLAC gives
// the same rows (lossless); the wrong tower or a file that is no audio is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/audio_encode.h"
#include "support/shell.h"
#include "support/temp_path.h"

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/";

ShellOutput embed(const std::string& args) {
  return run_shell(std::string(KAMERA_BINARY_DIR) + "/bin/kamera vision-embed " + args);
}

std::vector<float> rows_of(const nlohmann::json& j) {
  std::vector<float> out;
  for (const auto& r : j["embeddings"])
    for (const auto& v : r) out.push_back(v.get<float>());
  return out;
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

TEST(AudioEmbedCli, ClipRowsMatchFloat64NumpyAndFlacGivesTheSame) {
  const std::string mmproj = kDir + "qwen25o/mmproj.gguf", wav = kDir + "qwen25o/clip_16k.wav";
  const ShellOutput o = embed("--mmproj " + mmproj + " --audio " + wav + " --json");
  ASSERT_EQ(o.rc, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.out.substr(0, 300);
  EXPECT_EQ(j["tower"], "qwen2.5o");
  EXPECT_EQ(j["grid"], nlohmann::json::array({1, 750, 1}));  // 2 s: one 30-s window
  EXPECT_EQ(j["audio"]["format"], "wav");
  EXPECT_EQ(j["audio"]["sample_rate"], 16000);
  EXPECT_DOUBLE_EQ(j["audio"]["seconds"].get<double>(), 2.0);
  const std::vector<float> got = rows_of(j);
  const std::string ref_bytes = file_bytes(kDir + "qwen25o/numpy_embd.f32");
  std::vector<float> ref(ref_bytes.size() / 4);
  std::memcpy(ref.data(), ref_bytes.data(), ref.size() * 4);
  ASSERT_EQ(got.size(), ref.size());
  double scale = 0, diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, double(std::fabs(ref[i])));
    diff = std::max(diff, double(std::fabs(got[i] - ref[i])));
  }
  std::printf("vision-embed --audio vs float64 numpy: %.3e of the largest |value|\n", diff / scale);
  EXPECT_LT(diff / scale, 1e-4);

  const auto flac = audio_encode::flac16k(audio_encode::wav_pcm16(file_bytes(wav)));
  ASSERT_FALSE(flac.empty());
  const std::string flac_path = unique_temp("kamera-clip.flac");
  std::ofstream(flac_path, std::ios::binary)
      .write(reinterpret_cast<const char*>(flac.data()), std::streamsize(flac.size()));
  const ShellOutput f = embed("--mmproj " + mmproj + " --audio " + flac_path + " --json");
  std::remove(flac_path.c_str());
  ASSERT_EQ(f.rc, 0) << f.err;
  const auto fj = nlohmann::json::parse(f.out, nullptr, false);
  EXPECT_EQ(fj["audio"]["format"], "flac");
  EXPECT_EQ(rows_of(fj), got);
}

TEST(AudioEmbedCli, TheWrongTowerOrInputIsRefusedByName) {
  const std::string omni = kDir + "qwen25o/mmproj.gguf", wav = kDir + "qwen25o/clip_16k.wav";
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {"--mmproj " + kDir + "llava/mmproj.gguf --audio " + wav,
            "--audio needs a Qwen2.5-Omni (qwen2.5o) or Qwen2-Audio (qwen2a) mmproj"},
           {"--mmproj " + omni + " --audio " + omni, "not a WAV, FLAC or MP3 file"},
           {"--mmproj " + omni + " --audio " + wav + " --image " + kDir + "llava/img_32.png",
            "give exactly one of --image, --frames and --audio"}}) {
    SCOPED_TRACE(c.args);
    const ShellOutput o = embed(c.args + " --json");
    EXPECT_NE(o.rc, 0);
    const auto j = nlohmann::json::parse(o.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "stdout is not JSON: " << o.out;
    EXPECT_NE(j.dump().find(c.says), std::string::npos) << j.dump();
  }
}

}  // namespace
