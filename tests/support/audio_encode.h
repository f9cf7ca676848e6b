// Test audio written by libsndfile to memory: the committed WAV clip re-encoded as FLAC, MP3
// (libsndfile's MPEG layer III writer: Debian builds it on libmp3lame), float or 8-bit WAV, so
// the decoder's formats are checked against the clip's own samples without more fixtures.
#pragma once

#include <sndfile.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace audio_encode {

// A growable in-memory file for libsndfile's virtual I/O (read, write, seek).
struct Buffer {
  std::vector<uint8_t> bytes;
  sf_count_t at = 0;
};

inline sf_count_t buf_length(void* b) {
  return sf_count_t(static_cast<Buffer*>(b)->bytes.size());
}
inline sf_count_t buf_seek(sf_count_t off, int whence, void* b) {
  auto* f = static_cast<Buffer*>(b);
  const sf_count_t base = whence == SEEK_CUR ? f->at : whence == SEEK_END ? buf_length(b) : 0;
  if (base + off < 0) return -1;
  return f->at = base + off;
}
inline sf_count_t buf_read(void* out, sf_count_t n, void* b) {
  auto* f = static_cast<Buffer*>(b);
  const sf_count_t k = std::max<sf_count_t>(0, std::min(n, buf_length(b) - f->at));
  if (k > 0) std::memcpy(out, f->bytes.data() + f->at, size_t(k));
  f->at += k;
  return k;
}
inline sf_count_t buf_write(const void* in, sf_count_t n, void* b) {
  auto* f = static_cast<Buffer*>(b);
  if (size_t(f->at + n) > f->bytes.size()) f->bytes.resize(size_t(f->at + n));
  std::memcpy(f->bytes.data() + f->at, in, size_t(n));
  f->at += n;
  return n;
}
inline sf_count_t buf_tell(void* b) {
  return static_cast<Buffer*>(b)->at;
}

// Mono 16-bit samples at `rate` written as `format` (SF_FORMAT_FLAC | SF_FORMAT_PCM_16, ...);
// empty when libsndfile cannot write it. quality: SFC_SET_COMPRESSION_LEVEL when >= 0.
inline std::vector<uint8_t> encode(const std::vector<int16_t>& s, int rate, int format,
                                   double quality = -1) {
  Buffer buf;
  SF_VIRTUAL_IO io{buf_length, buf_seek, buf_read, buf_write, buf_tell};
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = 1;
  info.format = format;
  SNDFILE* f = sf_open_virtual(&io, SFM_WRITE, &info, &buf);
  if (!f) return {};
  // 16-bit samples written to a float file as s / 32768 (libsndfile's default keeps s)
  sf_command(f, SFC_SET_SCALE_INT_FLOAT_WRITE, nullptr, SF_TRUE);
  if (quality >= 0) sf_command(f, SFC_SET_COMPRESSION_LEVEL, &quality, sizeof quality);
  const bool ok = sf_writef_short(f, s.data(), sf_count_t(s.size())) == sf_count_t(s.size());
  sf_close(f);
  return ok ? buf.bytes : std::vector<uint8_t>{};
}

// A 16 kHz clip as 16-bit FLAC and as MP3 (MPEG-2 layer III at libsndfile's defaults).
inline std::vector<uint8_t> flac16k(const std::vector<int16_t>& s) {
  return encode(s, 16000, SF_FORMAT_FLAC | SF_FORMAT_PCM_16);
}
inline std::vector<uint8_t> mp3_16k(const std::vector<int16_t>& s) {
  return encode(s, 16000, SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III);
}

// The 16-bit samples of a mono PCM WAV's data chunk, read from the bytes by hand (an independent
// reference for the decoder).
inline std::vector<int16_t> wav_pcm16(const std::string& wav) {
  auto u32 = [&](size_t i) {
    return uint32_t(uint8_t(wav[i])) | uint32_t(uint8_t(wav[i + 1])) << 8 |
           uint32_t(uint8_t(wav[i + 2])) << 16 | uint32_t(uint8_t(wav[i + 3])) << 24;
  };
  for (size_t at = 12; at + 8 <= wav.size(); at += 8 + u32(at + 4) + (u32(at + 4) & 1)) {
    if (wav.compare(at, 4, "data") != 0) continue;
    std::vector<int16_t> s(u32(at + 4) / 2);
    for (size_t i = 0; i < s.size(); ++i)
      s[i] = int16_t(uint16_t(uint8_t(wav[at + 8 + 2 * i]) | uint8_t(wav[at + 9 + 2 * i]) << 8));
    return s;
  }
  return {};
}

}  // namespace audio_encode
