// Audio files through libsndfile from memory (media/audio_decode.h).
#include "media/audio_decode.h"

#include <sndfile.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>

namespace kamera {

namespace {

constexpr int kMaxChannels = 8;
constexpr int kMinRate = 1000, kMaxRate = 384000;
constexpr sf_count_t kBlockFrames = 4096;

uint32_t u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// The bytes libsndfile reads through its virtual I/O: read-only, seekable.
struct MemoryFile {
  std::span<const uint8_t> bytes;
  sf_count_t at = 0;
};

sf_count_t mem_length(void* f) {
  return sf_count_t(static_cast<MemoryFile*>(f)->bytes.size());
}
sf_count_t mem_seek(sf_count_t offset, int whence, void* f) {
  auto* m = static_cast<MemoryFile*>(f);
  const sf_count_t base = whence == SEEK_CUR ? m->at : whence == SEEK_END ? mem_length(f) : 0;
  const sf_count_t to = base + offset;
  if (to < 0 || to > mem_length(f)) return -1;
  return m->at = to;
}
sf_count_t mem_read(void* out, sf_count_t n, void* f) {
  auto* m = static_cast<MemoryFile*>(f);
  const sf_count_t k = std::max<sf_count_t>(0, std::min(n, mem_length(f) - m->at));
  if (k > 0) std::memcpy(out, m->bytes.data() + m->at, size_t(k));
  m->at += k;
  return k;
}
sf_count_t mem_write(const void*, sf_count_t, void*) {
  return 0;
}
sf_count_t mem_tell(void* f) {
  return static_cast<MemoryFile*>(f)->at;
}

struct SndfileCloser {
  void operator()(SNDFILE* s) const { sf_close(s); }
};
using Sndfile = std::unique_ptr<SNDFILE, SndfileCloser>;

// sf_open_virtual, its failure classified: libsndfile keeps an open's error in a global
// (sf_error(nullptr)), so opens are serialized to read it back race-free.
Result<Sndfile> open_memory(MemoryFile& file, SF_INFO& info, std::string_view name,
                            AudioFormat format) {
  static std::mutex open_mutex;
  SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  std::lock_guard lock(open_mutex);
  Sndfile s(sf_open_virtual(&io, SFM_READ, &info, &file));
  if (s) return s;
  const int err = sf_error(nullptr);
  const ErrorCode code = err == SF_ERR_UNRECOGNISED_FORMAT || err == SF_ERR_UNSUPPORTED_ENCODING
                             ? ErrorCode::Unsupported
                             : ErrorCode::CorruptData;
  return make_error(code, "{}: {} not decoded (libsndfile: {})", name, audio_format_name(format),
                    sf_strerror(nullptr));
}

// A WAV's chunks walked as the old reader did: one that declares more bytes than are present
// (libsndfile would read the data chunk cut short) makes the file truncated. The format tag of its
// fmt chunk (an extensible format's subtype), 0 without one.
Result<uint16_t> check_wav_chunks(std::span<const uint8_t> b, std::string_view name) {
  bool have_data = false;
  uint16_t tag = 0;
  for (size_t at = 12; at + 8 <= b.size();) {
    const uint8_t* h = b.data() + at;
    const uint32_t n = u32(h + 4);
    if (n > b.size() - at - 8)
      return make_error(ErrorCode::CorruptData, "{}: WAV chunk '{}' of {} bytes is truncated", name,
                        std::string_view(reinterpret_cast<const char*>(h), 4), n);
    if (std::memcmp(h, "fmt ", 4) == 0 && n >= 2) {
      tag = uint16_t(h[8] | h[9] << 8);
      if (tag == 0xFFFE && n >= 26) tag = uint16_t(h[32] | h[33] << 8);
    }
    have_data |= std::memcmp(h, "data", 4) == 0;
    at += 8 + size_t(n) + (n & 1);  // chunks are padded to an even size
  }
  if (!have_data) return make_error(ErrorCode::CorruptData, "{}: WAV without a data chunk", name);
  return tag;
}

// The WAV format tags libsndfile 1.2 decodes: PCM, MS ADPCM, IEEE float, A-law, mu-law, IMA ADPCM,
// GSM 6.10, G.721, MPEG layer III. A file of another that it cannot open is refused as
// Unsupported by its tag (libsndfile calls it malformed).
bool wav_tag_known(uint16_t tag) {
  for (uint16_t t : {0x0001, 0x0002, 0x0003, 0x0006, 0x0007, 0x0011, 0x0031, 0x0040, 0x0055})
    if (tag == t) return true;
  return false;
}

// The container libsndfile found must be the one declared (the sniff already checked the bytes).
bool major_matches(int sf_format, AudioFormat f) {
  const int major = sf_format & SF_FORMAT_TYPEMASK;
  switch (f) {
    case AudioFormat::Wav:
      return major == SF_FORMAT_WAV || major == SF_FORMAT_WAVEX;
    case AudioFormat::Flac:
      return major == SF_FORMAT_FLAC;
    case AudioFormat::Mp3:
      return major == SF_FORMAT_MPEG;
  }
  return false;
}

// The header's channels, rate and declared length against the limits, before any sample.
Status check_header(const SF_INFO& info, AudioFormat format, std::string_view name,
                    const AudioLimits& limits) {
  const char* fmt = audio_format_name(format);
  if (!major_matches(info.format, format))
    return make_error(ErrorCode::Unsupported, "{}: libsndfile read another container than {}", name,
                      fmt);
  if (info.channels < 1 || info.channels > kMaxChannels)
    return make_error(ErrorCode::Unsupported, "{}: {} channels (kamera reads 1 to {})", name,
                      info.channels, kMaxChannels);
  if (info.samplerate < kMinRate || info.samplerate > kMaxRate)
    return make_error(ErrorCode::Unsupported, "{}: {} sample rate {} Hz", name, fmt,
                      info.samplerate);
  if (info.frames < 0 ||
      (info.frames != SF_COUNT_MAX && double(info.frames) > limits.max_seconds * info.samplerate))
    return make_error(ErrorCode::InvalidArgument, "{}: {:.1f} s of audio (at most {:.0f} s)", name,
                      double(info.frames) / info.samplerate, limits.max_seconds);
  return Status::Ok();
}

// Every frame, mixed to mono by the channels' mean; at most the limit's frames. Fewer frames than
// the header declares (SF_COUNT_MAX: an MP3 of unknown length) make the file truncated.
Result<Audio> read_frames(SNDFILE* s, const SF_INFO& info, AudioFormat format,
                          std::string_view name, const AudioLimits& limits) {
  const auto max_frames = sf_count_t(limits.max_seconds * info.samplerate);
  const int ch = info.channels;
  const float scale = 1.0f / float(ch);
  Audio a;
  a.sample_rate = info.samplerate;
  a.samples.reserve(size_t(std::min(info.frames, max_frames)));
  std::vector<float> block(size_t(kBlockFrames * ch));
  for (sf_count_t got; (got = sf_readf_float(s, block.data(), kBlockFrames)) > 0;) {
    if (sf_count_t(a.samples.size()) + got > max_frames)
      return make_error(ErrorCode::InvalidArgument, "{}: over {:.0f} s of audio", name,
                        limits.max_seconds);
    for (sf_count_t i = 0; i < got; ++i) {
      const float* f = block.data() + i * ch;
      float sum = f[0];
      for (int c = 1; c < ch; ++c) sum += f[c];
      // a float file may hold NaN or infinities: samples no front end or tower can take
      if (!std::isfinite(sum))
        return make_error(ErrorCode::CorruptData,
                          "{}: sample {} is not a finite number (NaN or an infinity)", name,
                          a.samples.size());
      a.samples.push_back(ch == 1 ? sum : sum * scale);
    }
  }
  // an MP3's length may be mpg123's estimate from the file size (no LAME / Xing tag): within a
  // frame of 1152 samples
  const sf_count_t slack = format == AudioFormat::Mp3 ? 1152 : 0;
  const bool err = sf_error(s) != SF_ERR_NO_ERROR;
  if (info.frames != SF_COUNT_MAX && sf_count_t(a.samples.size()) + slack < info.frames)
    return make_error(ErrorCode::CorruptData,
                      "{}: truncated: {} of the {} frames its header declares{}{}", name,
                      a.samples.size(), info.frames, err ? " (libsndfile: " : "",
                      err ? std::string(sf_strerror(s)) + ")" : "");
  if (err)
    return make_error(ErrorCode::CorruptData, "{}: {} is malformed (libsndfile: {})", name,
                      audio_format_name(format), sf_strerror(s));
  return a;
}

}  // namespace

std::optional<AudioFormat> audio_format_named(std::string_view name) {
  if (name == "wav") return AudioFormat::Wav;
  if (name == "flac") return AudioFormat::Flac;
  if (name == "mp3") return AudioFormat::Mp3;
  return std::nullopt;
}

const char* audio_format_name(AudioFormat f) {
  switch (f) {
    case AudioFormat::Wav:
      return "WAV";
    case AudioFormat::Flac:
      return "FLAC";
    case AudioFormat::Mp3:
      return "MP3";
  }
  return "?";
}

const char* audio_format_names() {
  return "wav, mp3, flac";
}

bool is_wav(std::span<const uint8_t> b) {
  return b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 &&
         std::memcmp(b.data() + 8, "WAVE", 4) == 0;
}

std::optional<AudioFormat> sniff_audio_format(std::span<const uint8_t> b) {
  if (is_wav(b)) return AudioFormat::Wav;
  if (b.size() >= 4 && std::memcmp(b.data(), "fLaC", 4) == 0) return AudioFormat::Flac;
  if (b.size() >= 10 && std::memcmp(b.data(), "ID3", 3) == 0) return AudioFormat::Mp3;
  // an MPEG audio frame header: 11 sync bits, a version, layer III (01)
  if (b.size() >= 4 && b[0] == 0xFF && (b[1] & 0xE0) == 0xE0 && ((b[1] >> 1) & 3) == 1 &&
      ((b[1] >> 3) & 3) != 1)
    return AudioFormat::Mp3;
  return std::nullopt;
}

Result<Audio> decode_audio(std::span<const uint8_t> b, AudioFormat format, std::string_view name,
                           const AudioLimits& limits) {
  if (int64_t(b.size()) > limits.max_bytes)
    return make_error(ErrorCode::InvalidArgument, "{}: {} bytes (at most {})", name, b.size(),
                      limits.max_bytes);
  const auto sniffed = sniff_audio_format(b);
  if (sniffed != format)
    return make_error(ErrorCode::Unsupported, "{}: declared {}, but the bytes are {}", name,
                      audio_format_name(format),
                      sniffed ? audio_format_name(*sniffed) : "not WAV, FLAC or MP3");
  uint16_t wav_tag = 0;
  if (format == AudioFormat::Wav) {
    KAMERA_ASSIGN_OR_RETURN(wav_tag, check_wav_chunks(b, name));
  }
  MemoryFile file{b};
  SF_INFO info{};
  auto s = open_memory(file, info, name, format);
  if (!s.ok() && format == AudioFormat::Wav && !wav_tag_known(wav_tag))
    return make_error(ErrorCode::Unsupported, "{}: WAV format tag 0x{:04x} is not decoded ({})",
                      name, wav_tag, s.message());
  if (!s.ok()) return s.error();
  KAMERA_TRY(check_header(info, format, name, limits));
  return read_frames(s->get(), info, format, name, limits);
}

}  // namespace kamera
