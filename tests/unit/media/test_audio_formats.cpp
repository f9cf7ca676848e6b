// The audio formats decode_audio reads through libsndfile, each checked against the committed
// clip's own samples (tests/data/qwen25o/clip_16k.wav: 2 s of a chirp with harmonics, 16-bit mono
// at 16 kHz) read by hand from its data chunk: the WAV itself exactly (as the hand-written reader
// it replaced scaled it, s / 32768), FLAC exactly (lossless), float and 8-bit WAV within their
// quantization, MP3 by its signal-to-noise ratio; and the refusals by name (another container
// than declared, truncated files, absurd headers, over-long clips before their samples are read).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "media/audio_decode.h"
#include "support/audio_encode.h"
#include "support/base64.h"

namespace {

using namespace kamera;

const std::string kClip = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen25o/clip_16k.wav";

struct Clip {
  std::string wav = file_bytes(kClip);
  std::vector<int16_t> pcm = audio_encode::wav_pcm16(wav);
};

std::span<const uint8_t> span_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The largest |decoded - s / 32768| over the clip (infinity when the lengths differ).
double max_error(const std::vector<float>& decoded, const std::vector<int16_t>& pcm) {
  if (decoded.size() != pcm.size()) return INFINITY;
  double e = 0;
  for (size_t i = 0; i < pcm.size(); ++i)
    e = std::max(e, std::abs(double(decoded[i]) - pcm[i] / 32768.0));
  return e;
}

// The best signal-to-noise ratio (dB) of y against x over lags in [-max_lag, max_lag] (y[i + lag]
// against x[i], over the samples both have), and that lag.
std::pair<double, int> best_snr(const std::vector<float>& y, const std::vector<int16_t>& x,
                                int max_lag) {
  std::pair<double, int> best{-INFINITY, 0};
  for (int lag = -max_lag; lag <= max_lag; ++lag) {
    double sig = 0, noise = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const int64_t j = int64_t(i) + lag;
      if (j < 0 || j >= int64_t(y.size())) continue;
      const double r = x[i] / 32768.0;
      sig += r * r;
      noise += (y[size_t(j)] - r) * (y[size_t(j)] - r);
    }
    const double snr = 10 * std::log10(sig / std::max(noise, 1e-30));
    if (snr > best.first) best = {snr, lag};
  }
  return best;
}

}  // namespace

TEST(AudioFormats, WavFixtureIsItsPcmOver32768) {
  const Clip c;
  ASSERT_EQ(c.pcm.size(), 32000u);  // 2 s at 16 kHz
  auto a = decode_wav(span_of(c.wav), "clip");
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->sample_rate, 16000);
  ASSERT_EQ(a->samples.size(), c.pcm.size());
  size_t differ = 0;  // bit-exact: the old reader's float(s) / 32768.0f
  for (size_t i = 0; i < c.pcm.size(); ++i) differ += a->samples[i] != float(c.pcm[i]) / 32768.0f;
  EXPECT_EQ(differ, 0u);
}

TEST(AudioFormats, FlacIsLossless) {
  const Clip c;
  const auto flac = audio_encode::flac16k(c.pcm);
  ASSERT_FALSE(flac.empty());
  EXPECT_LT(flac.size(), c.wav.size());  // compressed
  auto a = decode_audio(flac, AudioFormat::Flac, "clip.flac");
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->sample_rate, 16000);
  EXPECT_EQ(max_error(a->samples, c.pcm), 0.0);
}

TEST(AudioFormats, FloatAndEightBitWav) {
  const Clip c;
  const auto f32 = audio_encode::encode(c.pcm, 16000, SF_FORMAT_WAV | SF_FORMAT_FLOAT);
  const auto u8 = audio_encode::encode(c.pcm, 16000, SF_FORMAT_WAV | SF_FORMAT_PCM_U8);
  ASSERT_FALSE(f32.empty());
  ASSERT_FALSE(u8.empty());
  auto a = decode_wav(f32, "f32.wav");
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_LE(max_error(a->samples, c.pcm), 1.0 / 32768);
  auto b = decode_wav(u8, "u8.wav");
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_LE(max_error(b->samples, c.pcm), 1.0 / 128);
}

// A float WAV may hold NaN or infinities (a hostile client's bytes): refused by the sample's
// index, never passed to the front end (a NaN there makes every row of the clip NaN).
TEST(AudioFormats, NonFiniteFloatSamplesAreRefused) {
  const Clip c;
  const auto f32 = audio_encode::encode(c.pcm, 16000, SF_FORMAT_WAV | SF_FORMAT_FLOAT);
  ASSERT_FALSE(f32.empty());
  const std::string bytes(f32.begin(), f32.end());
  const size_t data = bytes.find("data");
  ASSERT_NE(data, std::string::npos);
  for (const uint32_t bits : {0x7fc00000u, 0x7f800000u, 0xff800000u}) {  // NaN, +inf, -inf
    auto bad = f32;
    std::memcpy(bad.data() + data + 8 + 4 * 1234, &bits, 4);  // sample 1234
    auto r = decode_wav(bad, "nan.wav");
    ASSERT_FALSE(r.ok()) << std::hex << bits;
    EXPECT_EQ(r.code(), ErrorCode::CorruptData);
    EXPECT_NE(r.message().find("nan.wav: sample 1234 is not a finite number"), std::string::npos)
        << r.message();
  }
}

// libmp3lame at libsndfile's defaults, 16 kHz (MPEG-2 layer III); mpg123 drops the encoder's delay
// and padding from the LAME tag (gapless), so the decoded clip lines up with the source at lag 0.
TEST(AudioFormats, Mp3IsCloseToTheClip) {
  const Clip c;
  const auto mp3 = audio_encode::mp3_16k(c.pcm);
  ASSERT_FALSE(mp3.empty()) << "libsndfile cannot write MP3 here";
  ASSERT_EQ(sniff_audio_format(mp3), AudioFormat::Mp3);
  auto a = decode_audio(mp3, AudioFormat::Mp3, "clip.mp3");
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->sample_rate, 16000);
  const auto [snr, lag] = best_snr(a->samples, c.pcm, 2400);
  std::printf("mp3: %zu bytes, %zu samples (source %zu), SNR %.1f dB at lag %d\n", mp3.size(),
              a->samples.size(), c.pcm.size(), snr, lag);
  EXPECT_EQ(a->samples.size(), c.pcm.size());  // gapless: the encoder's delay and padding dropped
  EXPECT_EQ(lag, 0);
  EXPECT_GT(snr, 20.0);  // measured 35.1 dB
}

TEST(AudioFormats, RefusalsNameTheProblem) {
  const Clip c;
  const auto flac = audio_encode::flac16k(c.pcm);
  const auto mp3 = audio_encode::mp3_16k(c.pcm);
  ASSERT_FALSE(flac.empty());
  ASSERT_FALSE(mp3.empty());
  auto half = [](std::vector<uint8_t> b) {
    b.resize(b.size() / 2);
    return b;
  };
  // STREAMINFO's 36-bit total samples' top 4 bits set (over 15 * 2^32): 46 days at 16 kHz
  auto absurd = flac;
  absurd[21] |= 0x0F;
  std::vector<uint8_t> garbage = {'f', 'L', 'a', 'C'};
  garbage.resize(200, 0x5A);
  struct Case {
    std::vector<uint8_t> bytes;
    AudioFormat format;
    ErrorCode code;
    const char* says;
  };
  const std::vector<Case> cases = {
      {flac, AudioFormat::Wav, ErrorCode::Unsupported, "declared WAV, but the bytes are FLAC"},
      {mp3, AudioFormat::Flac, ErrorCode::Unsupported, "declared FLAC, but the bytes are MP3"},
      {{span_of(c.wav).begin(), span_of(c.wav).end()},
       AudioFormat::Mp3,
       ErrorCode::Unsupported,
       "declared MP3, but the bytes are WAV"},
      {half(flac), AudioFormat::Flac, ErrorCode::CorruptData, "truncated"},
      {half(mp3), AudioFormat::Mp3, ErrorCode::CorruptData, "truncated"},
      {garbage, AudioFormat::Flac, ErrorCode::CorruptData, "FLAC"},
      {absurd, AudioFormat::Flac, ErrorCode::InvalidArgument, "s of audio (at most 600 s)"},
  };
  for (const Case& k : cases) {
    auto r = decode_audio(k.bytes, k.format, "clip 1");
    ASSERT_FALSE(r.ok()) << k.says;
    EXPECT_EQ(r.code(), k.code) << r.message();
    EXPECT_NE(r.message().find(k.says), std::string::npos) << r.message();
    EXPECT_EQ(r.message().rfind("clip 1", 0), 0u) << r.message();
  }
  // the duration is checked from the header, before the samples: a FLAC's limit
  auto long_flac =
      decode_audio(flac, AudioFormat::Flac, "long", AudioLimits{int64_t(1) << 20, 1.5});
  ASSERT_FALSE(long_flac.ok());
  EXPECT_NE(long_flac.message().find("2.0 s of audio (at most 2 s)"), std::string::npos)
      << long_flac.message();
  auto big = decode_audio(flac, AudioFormat::Flac, "big", AudioLimits{100, 600});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.code(), ErrorCode::InvalidArgument) << big.message();
}
