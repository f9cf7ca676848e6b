// Audio input (media/): WAV decoding (media/audio_decode.h) with its refusals by name, the
// windowed-sinc resampler measured on sines, and Whisper's log-mel front end against an independent
// numpy implementation (tests/unit/media/whisper_mel.py, run here; skipped, saying so, where no
// python3 has numpy).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numbers>
#include <random>

#include "media/audio_decode.h"
#include "media/audio_resample.h"
#include "media/log_mel.h"

namespace {

using namespace kamera;

void put16(std::vector<uint8_t>& b, uint32_t v) {
  b.push_back(uint8_t(v));
  b.push_back(uint8_t(v >> 8));
}
void put32(std::vector<uint8_t>& b, uint32_t v) {
  put16(b, v & 0xFFFF);
  put16(b, v >> 16);
}
void tag(std::vector<uint8_t>& b, const char* t) {
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(t[i]));
}

// A RIFF/WAVE file: a LIST chunk first (skipped), fmt, then data of the given 16-bit samples
// (interleaved when channels is 2).
std::vector<uint8_t> wav_bytes(const std::vector<int16_t>& s, int channels, int rate,
                               int format = 1, int bits = 16) {
  std::vector<uint8_t> b;
  tag(b, "RIFF");
  put32(b, 0);  // patched below
  tag(b, "WAVE");
  tag(b, "LIST");
  put32(b, 5);
  b.insert(b.end(), {'I', 'N', 'F', 'O', 'x', 0});  // 5 bytes and the pad byte
  tag(b, "fmt ");
  put32(b, 16);
  put16(b, uint32_t(format));
  put16(b, uint32_t(channels));
  put32(b, uint32_t(rate));
  put32(b, uint32_t(rate * channels * bits / 8));
  put16(b, uint32_t(channels * bits / 8));
  put16(b, uint32_t(bits));
  tag(b, "data");
  put32(b, uint32_t(s.size() * 2));
  for (int16_t v : s) put16(b, uint16_t(v));
  const uint32_t riff = uint32_t(b.size() - 8);
  for (int i = 0; i < 4; ++i) b[4 + size_t(i)] = uint8_t(riff >> (8 * i));
  return b;
}

TEST(Audio, WavMonoAndStereoDecode) {
  auto mono = decode_wav(wav_bytes({0, 16384, -32768, 32767}, 1, 22050), "mono");
  ASSERT_TRUE(mono.ok()) << mono.message();
  EXPECT_EQ(mono->sample_rate, 22050);
  ASSERT_EQ(mono->samples.size(), 4u);
  EXPECT_EQ(mono->samples[1], 0.5f);
  EXPECT_EQ(mono->samples[2], -1.0f);
  EXPECT_EQ(mono->samples[3], 32767.0f / 32768.0f);
  // stereo: the mean of the two channels
  auto st = decode_wav(wav_bytes({16384, 0, -8192, -8192, 100, -100}, 2, 48000), "stereo");
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(st->samples.size(), 3u);
  EXPECT_EQ(st->samples[0], 0.25f);
  EXPECT_EQ(st->samples[1], -0.25f);
  EXPECT_EQ(st->samples[2], 0.0f);
  // more channels: their mean too
  auto three = decode_wav(wav_bytes({300, 600, -1200, 3, 3, 3}, 3, 16000), "three");
  ASSERT_TRUE(three.ok()) << three.message();
  ASSERT_EQ(three->samples.size(), 2u);
  EXPECT_FLOAT_EQ(three->samples[0], -100.0f / 32768);
  EXPECT_FLOAT_EQ(three->samples[1], 3.0f / 32768);
}

TEST(Audio, WavRefusalsNameTheProblem) {
  struct Case {
    std::vector<uint8_t> bytes;
    ErrorCode code;
    const char* says;
  };
  auto truncated = wav_bytes(std::vector<int16_t>(100, 7), 1, 16000);
  truncated.resize(truncated.size() - 10);
  auto no_data = wav_bytes({}, 1, 16000);
  no_data.resize(no_data.size() - 8);
  const std::vector<Case> cases = {
      {wav_bytes({1, 2}, 1, 16000, 0x1234, 16), ErrorCode::Unsupported,
       "WAV format tag 0x1234 is not decoded"},
      {wav_bytes(std::vector<int16_t>(90, 3), 9, 16000), ErrorCode::Unsupported, "9 channels"},
      {wav_bytes(std::vector<int16_t>(10, 3), 1, 500), ErrorCode::Unsupported, "500 Hz"},
      {truncated, ErrorCode::CorruptData, "truncated"},
      {no_data, ErrorCode::CorruptData, "without a data chunk"},
      {{'R', 'I', 'F', 'F', 0, 0, 0, 0, 'A', 'V', 'I', ' '},
       ErrorCode::Unsupported,
       "declared WAV, but the bytes are not WAV, FLAC or MP3"},
  };
  for (const Case& c : cases) {
    auto r = decode_wav(c.bytes, "clip 1");
    ASSERT_FALSE(r.ok()) << c.says;
    EXPECT_EQ(r.code(), c.code) << r.message();
    EXPECT_NE(r.message().find(c.says), std::string::npos) << r.message();
    EXPECT_EQ(r.message().rfind("clip 1", 0), 0u) << r.message();
  }
  auto tooLong = decode_wav(wav_bytes(std::vector<int16_t>(32000, 1), 1, 16000), "long",
                            AudioLimits{int64_t(1) << 20, 1.5});
  ASSERT_FALSE(tooLong.ok());
  EXPECT_EQ(tooLong.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(tooLong.message().find("2.0 s of audio"), std::string::npos) << tooLong.message();
}

std::vector<float> sine(double hz, int rate, int n, double amp = 0.5) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    x[size_t(i)] = float(amp * std::sin(2 * std::numbers::pi * hz * i / rate));
  return x;
}

// max |y - sine| over the interior (away from the zero-padded edges) / amplitude
double sine_error(const std::vector<float>& y, double hz, int rate, double amp = 0.5) {
  const auto ref = sine(hz, rate, int(y.size()), amp);
  double e = 0.0;
  for (size_t i = y.size() / 10; i < y.size() * 9 / 10; ++i)
    e = std::max(e, std::abs(double(y[i]) - ref[i]));
  return e / amp;
}

TEST(Audio, ResamplerKeepsThePassbandAndCutsTheStopband) {
  struct Case {
    int in, out;
    double hz, max_err;
  };
  for (const Case& c : {Case{44100, 16000, 440.0, 1e-4}, Case{48000, 16000, 3000.0, 1e-4},
                        Case{8000, 16000, 1000.0, 1e-4}, Case{22050, 16000, 5000.0, 1e-4}}) {
    auto y = resample_audio(sine(c.hz, c.in, c.in), c.in, c.out);
    ASSERT_TRUE(y.ok()) << y.message();
    EXPECT_EQ(int64_t(y->size()), c.out);  // one second in, one second out
    const double e = sine_error(*y, c.hz, c.out);
    std::printf("%d -> %d Hz, %.0f Hz sine: max error %.2e of its amplitude\n", c.in, c.out, c.hz,
                e);
    EXPECT_LT(e, c.max_err);
  }
  // a 10 kHz tone above 16 kHz's Nyquist frequency: attenuated by more than 80 dB
  auto y = resample_audio(sine(10000.0, 44100, 44100), 44100, 16000);
  ASSERT_TRUE(y.ok());
  double peak = 0.0;
  for (size_t i = y->size() / 10; i < y->size() * 9 / 10; ++i)
    peak = std::max(peak, std::abs(double((*y)[i])));
  std::printf("10 kHz at 44.1 -> 16 kHz: peak %.2e of 0.5\n", peak);
  EXPECT_LT(peak / 0.5, 1e-4);
  auto same = resample_audio(sine(440.0, 16000, 100), 16000, 16000);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, sine(440.0, 16000, 100));
  EXPECT_FALSE(resample_audio(sine(1, 16000, 10), 16000, 100).ok());
}

// A python3 that has numpy, or "" (the test then skips, saying so).
std::string numpy_python() {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    const std::string cmd = std::string(py) + " -c 'import numpy' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return "";
}

std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  std::vector<float> v(size_t(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  return v;
}

// A chirp with noise, 2.5 s; a 31-second clip of clicks (two windows); a clip of 150 samples
// (shorter than half an FFT window: the reflection reads the padding).
std::vector<std::vector<float>> mel_clips() {
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 0.02f);
  std::vector<float> chirp(40000);
  for (size_t i = 0; i < chirp.size(); ++i) {
    const double t = double(i) / 16000;
    chirp[i] = float(0.4 * std::sin(2 * std::numbers::pi * (200 * t + 600 * t * t))) + noise(rng);
  }
  std::vector<float> clicks(16000 * 31, 0.0f);
  for (size_t i = 0; i < clicks.size(); i += 1601) clicks[i] = 0.7f;
  std::vector<float> tiny(150);
  for (auto& v : tiny) v = noise(rng) * 10;
  return {chirp, clicks, tiny};
}

// whisper_mel.py's log-mel of `clip` (with `flag`, e.g. "--centered"), written by numpy.
std::vector<float> numpy_mel(const std::string& py, const std::vector<float>& clip, int k,
                             const std::string& flag = "") {
  const std::string script = std::string(KAMERA_SOURCE_DIR) + "/tests/unit/media/whisper_mel.py";
  const std::string in = ::testing::TempDir() + "mel_in_" + std::to_string(k) + ".f32";
  const std::string out = ::testing::TempDir() + "mel_out_" + std::to_string(k) + ".f32";
  std::ofstream(in, std::ios::binary)
      .write(reinterpret_cast<const char*>(clip.data()), std::streamsize(clip.size() * 4));
  EXPECT_EQ(std::system((py + " " + script + " " + flag + " " + in + " " + out).c_str()), 0);
  return read_f32(out);
}

TEST(Audio, LogMelMatchesNumpyWhisper) {
  const std::string py = numpy_python();
  if (py.empty()) GTEST_SKIP() << "no python3 with numpy (Debian's python3-numpy)";
  int k = 0;
  for (const auto& clip : mel_clips()) {
    const std::vector<float> ref = numpy_mel(py, clip, k++);
    const std::vector<LogMel> got = whisper_log_mel(clip);
    ASSERT_EQ(ref.size(), got.size() * 128 * 3000) << "windows differ";
    double err = 0.0;
    for (size_t w = 0; w < got.size(); ++w) {
      ASSERT_EQ(got[w].n_mels, 128);
      ASSERT_EQ(got[w].n_frames, 3000);
      for (size_t i = 0; i < got[w].data.size(); ++i)
        err = std::max(err, std::abs(double(got[w].data[i]) - ref[w * 128 * 3000 + i]));
    }
    std::printf("clip of %zu samples: %zu windows, max |kamera - numpy| = %.2e\n", clip.size(),
                got.size(), err);
    EXPECT_LT(err, 1e-4);
  }
}

// Qwen3's front end (centered_log_mel: the clip's own frames, reflected at both ends): the same
// clips, and one of 200 samples (the end's reflection reaches sample -1: zero), against numpy.
TEST(Audio, CenteredLogMelMatchesNumpy) {
  const std::string py = numpy_python();
  if (py.empty()) GTEST_SKIP() << "no python3 with numpy (Debian's python3-numpy)";
  auto clips = mel_clips();
  clips.push_back(std::vector<float>(clips[0].begin(), clips[0].begin() + 200));
  int k = 10;
  for (const auto& clip : clips) {
    const std::vector<float> ref = numpy_mel(py, clip, k++, "--centered");
    const LogMel got = centered_log_mel(clip);
    ASSERT_EQ(got.n_mels, 128);
    ASSERT_EQ(got.n_frames, int(clip.size() / 160 + 1));
    ASSERT_EQ(ref.size(), got.data.size());
    double err = 0.0;
    for (size_t i = 0; i < got.data.size(); ++i)
      err = std::max(err, std::abs(double(got.data[i]) - ref[i]));
    std::printf("clip of %zu samples: %d frames, max |kamera - numpy| = %.2e\n", clip.size(),
                got.n_frames, err);
    EXPECT_LT(err, 1e-4);
  }
}

}  // namespace
