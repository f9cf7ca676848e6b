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

// got within 1e-4 of the largest |value| of the float64 numpy rows in `ref_path` (printed).
void expect_numpy_rows(const std::vector<float>& got, const std::string& ref_path) {
  const std::string ref_bytes = file_bytes(ref_path);
  std::vector<float> ref(ref_bytes.size() / 4);
  std::memcpy(ref.data(), ref_bytes.data(), ref.size() * 4);
  ASSERT_EQ(got.size(), ref.size());
  double scale = 0, diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, double(std::fabs(ref[i])));
    diff = std::max(diff, double(std::fabs(got[i] - ref[i])));
  }
  std::printf("vision-embed --audio vs float64 numpy (%s): %.3e of the largest |value|\n",
              ref_path.c_str(), diff / scale);
  EXPECT_LT(diff / scale, 1e-4);
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
  expect_numpy_rows(got, kDir + "qwen25o/numpy_embd.f32");

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

// A Qwen3-ASR tower (clip.audio.projector_type qwen3a, no clip.projector_type): the 8.5-s clip's
// two windows, 117 rows, as tests/data/qwen3a/numpy_qwen3a.py computes them in float64.
TEST(AudioEmbedCli, Qwen3ClipRowsMatchFloat64Numpy) {
  const ShellOutput o = embed("--mmproj " + kDir + "qwen3a/mmproj.gguf --audio " + kDir +
                              "qwen3a/clip_16k.wav --json");
  ASSERT_EQ(o.rc, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.out.substr(0, 300);
  EXPECT_EQ(j["tower"], "qwen3a");
  EXPECT_EQ(j["grid"], nlohmann::json::array({2, 117, 1}));  // windows of 800 and 51 frames
  EXPECT_EQ(j["dim"], 64);
  EXPECT_DOUBLE_EQ(j["audio"]["seconds"].get<double>(), 8.5);
  const std::vector<float> got = rows_of(j);
  expect_numpy_rows(got, kDir + "qwen3a/numpy_embd.f32");
}

TEST(AudioEmbedCli, TheWrongTowerOrInputIsRefusedByName) {
  const std::string omni = kDir + "qwen25o/mmproj.gguf", wav = kDir + "qwen25o/clip_16k.wav";
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {"--mmproj " + kDir + "llava/mmproj.gguf --audio " + wav,
            "--audio needs a Qwen2.5-Omni (qwen2.5o), Qwen2-Audio (qwen2a) or Qwen3-Omni / "
            "Qwen3-ASR (qwen3a) mmproj"},
           {"--mmproj " + kDir + "qwen3a/mmproj.gguf --image " + kDir + "llava/img_32.png",
            "projector type 'qwen3a' is an audio tower with no vision tower: give --audio"},
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
