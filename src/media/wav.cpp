// The RIFF/WAVE reader (media/wav.h).
#include "media/wav.h"

#include <cstring>

namespace kamera {

namespace {

constexpr uint16_t kFormatPcm = 1;
constexpr uint16_t kFormatExtensible = 0xFFFE;

uint16_t u16(const uint8_t* p) {
  return uint16_t(p[0] | (p[1] << 8));
}
uint32_t u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

struct WavFormat {
  uint16_t tag = 0, channels = 0, bits = 0, block_align = 0;
  uint32_t rate = 0;
};

// The "fmt " chunk's body; an extensible format's subtype GUID starts with the format tag.
Result<WavFormat> read_format(const uint8_t* p, uint32_t n, std::string_view name) {
  if (n < 16) return make_error(ErrorCode::CorruptData, "{}: WAV fmt chunk of {} bytes", name, n);
  WavFormat f{u16(p), u16(p + 2), u16(p + 14), u16(p + 12), u32(p + 4)};
  if (f.tag == kFormatExtensible) {
    if (n < 40)
      return make_error(ErrorCode::CorruptData, "{}: WAV extensible fmt chunk of {} bytes", name,
                        n);
    f.tag = u16(p + 24);
  }
  if (f.tag != kFormatPcm)
    return make_error(ErrorCode::Unsupported,
                      "{}: WAV format tag {} (kamera reads 16-bit integer PCM only)", name, f.tag);
  if (f.bits != 16)
    return make_error(ErrorCode::Unsupported, "{}: {}-bit WAV (kamera reads 16-bit PCM only)", name,
                      f.bits);
  if (f.channels < 1 || f.channels > 2)
    return make_error(ErrorCode::Unsupported, "{}: {} channels (kamera reads mono or stereo)", name,
                      f.channels);
  if (f.block_align != 2 * f.channels)
    return make_error(ErrorCode::CorruptData, "{}: WAV block align {} for {} 16-bit channels", name,
                      f.block_align, f.channels);
  if (f.rate < 1000 || f.rate > 384000)
    return make_error(ErrorCode::Unsupported, "{}: WAV sample rate {} Hz", name, f.rate);
  return f;
}

Result<Audio> read_samples(const WavFormat& f, const uint8_t* p, uint32_t n, std::string_view name,
                           const WavLimits& limits) {
  const uint64_t frames = n / f.block_align;
  if (double(frames) > limits.max_seconds * f.rate)
    return make_error(ErrorCode::InvalidArgument, "{}: {:.1f} s of audio (at most {:.0f} s)", name,
                      double(frames) / f.rate, limits.max_seconds);
  Audio a;
  a.sample_rate = int(f.rate);
  a.samples.resize(frames);
  for (uint64_t i = 0; i < frames; ++i) {
    const uint8_t* s = p + i * f.block_align;
    const float l = float(int16_t(u16(s))) / 32768.0f;
    a.samples[i] = f.channels == 1 ? l : 0.5f * (l + float(int16_t(u16(s + 2))) / 32768.0f);
  }
  return a;
}

}  // namespace

bool is_wav(std::span<const uint8_t> b) {
  return b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 &&
         std::memcmp(b.data() + 8, "WAVE", 4) == 0;
}

Result<Audio> decode_wav(std::span<const uint8_t> b, std::string_view name,
                         const WavLimits& limits) {
  if (int64_t(b.size()) > limits.max_bytes)
    return make_error(ErrorCode::InvalidArgument, "{}: {} bytes (at most {})", name, b.size(),
                      limits.max_bytes);
  if (!is_wav(b))
    return make_error(ErrorCode::InvalidArgument, "{}: not a WAV (RIFF/WAVE) file", name);
  WavFormat fmt;
  bool have_fmt = false;
  size_t at = 12;
  while (at + 8 <= b.size()) {
    const uint8_t* h = b.data() + at;
    const uint32_t n = u32(h + 4);
    if (n > b.size() - at - 8)
      return make_error(ErrorCode::CorruptData, "{}: WAV chunk '{}' of {} bytes is truncated", name,
                        std::string_view(reinterpret_cast<const char*>(h), 4), n);
    if (std::memcmp(h, "fmt ", 4) == 0) {
      KAMERA_ASSIGN_OR_RETURN(fmt, read_format(h + 8, n, name));
      have_fmt = true;
    } else if (std::memcmp(h, "data", 4) == 0) {
      if (!have_fmt)
        return make_error(ErrorCode::CorruptData, "{}: WAV data before its fmt chunk", name);
      return read_samples(fmt, h + 8, n, name, limits);
    }
    at += 8 + size_t(n) + (n & 1);  // chunks are padded to an even size
  }
  return make_error(ErrorCode::CorruptData, "{}: WAV without a data chunk", name);
}

}  // namespace kamera
