#include "tokenizer/utf8.h"

namespace kamera {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// True when s[0..n) (n < the lead's length) could still become a well-formed sequence.
bool utf8_could_continue(const unsigned char* s, size_t n) {
  const size_t need = utf8_lead_len(s[0]);
  if (need <= 1 || n >= need) return false;
  for (size_t i = 1; i < n; ++i) {
    if ((s[i] & 0xC0) != 0x80) return false;
  }
  if (n >= 2) {  // the second byte's range depends on the lead (overlongs, surrogates, > U+10FFFF)
    const unsigned c0 = s[0], c1 = s[1];
    if (c0 == 0xE0 && c1 < 0xA0) return false;
    if (c0 == 0xED && c1 > 0x9F) return false;
    if (c0 == 0xF0 && c1 < 0x90) return false;
    if (c0 == 0xF4 && c1 > 0x8F) return false;
  }
  return true;
}

}  // namespace

size_t utf8_lead_len(unsigned char c) {
  if (c < 0xC2) return 1;  // ASCII, continuation bytes, overlong leads C0/C1
  if (c < 0xE0) return 2;
  if (c < 0xF0) return 3;
  if (c < 0xF5) return 4;
  return 1;
}

size_t utf8_valid_len(const unsigned char* s, size_t n) {
  const unsigned c = s[0];
  if (c < 0x80) return 1;
  const size_t len = utf8_lead_len(s[0]);
  if (len == 1 || len > n) return 0;
  uint32_t cp = c & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

bool utf8_is_valid(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const size_t len = utf8_valid_len(p + i, s.size() - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string utf8_repair(std::string s) {
  if (utf8_is_valid(s)) return s;
  std::string out;
  out.reserve(s.size() + 16);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = utf8_valid_len(p + i, s.size() - i);
    if (len == 0) {
      out.append(kReplacement);
      ++i;
    } else {
      out.append(s, i, len);
      i += len;
    }
  }
  return out;
}

std::string Utf8Stream::push(std::string_view bytes) {
  tail_.append(bytes);
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(tail_.data());
  const size_t n = tail_.size();
  size_t i = 0;
  while (i < n) {
    const size_t len = utf8_valid_len(p + i, n - i);
    if (len > 0) {
      out.append(tail_, i, len);
      i += len;
    } else if (utf8_could_continue(p + i, n - i)) {
      break;  // an unfinished character at the end: wait for its remaining bytes
    } else {
      out.append(kReplacement);
      ++i;
    }
  }
  tail_.erase(0, i);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out;
  for (size_t i = 0; i < tail_.size(); ++i) out.append(kReplacement);
  tail_.clear();
  return out;
}

}  // namespace kamera
