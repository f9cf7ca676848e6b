// UTF-8 helpers for tokenizers and text streaming: well-formedness, repair, and an incremental
// decoder that never emits a broken character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kamera {

// Length of the well-formed UTF-8 sequence at s[0..n) (1..4; no overlongs, no surrogates, at most
// U+10FFFF), or 0 when s does not start one (a stray continuation byte, a bad lead byte, a
// truncated or malformed sequence). n must be at least 1.
size_t utf8_valid_len(const unsigned char* s, size_t n);

// Number of bytes a sequence starting with lead byte `c` claims (1 for ASCII and for bytes that
// cannot start a sequence).
size_t utf8_lead_len(unsigned char c);

bool utf8_is_valid(std::string_view s);

// `s` with every ill-formed sequence replaced by U+FFFD, one per offending byte (the string is
// returned unchanged, without a copy when the caller moves it in, if it is already valid).
std::string utf8_repair(std::string s);

// Incremental text output: feed token bytes as they come, get back only complete characters.
// An incomplete sequence at the end is held back until the bytes that finish it arrive; bytes
// that can never become a character are passed on as U+FFFD so the output is always valid UTF-8.
//   Utf8Stream s;  out += s.push(piece) ... ; out += s.flush();
class Utf8Stream {
 public:
  std::string push(std::string_view bytes);
  // The held-back tail (an unfinished character) as U+FFFD replacements; empties the stream.
  std::string flush();
  size_t pending() const { return tail_.size(); }

 private:
  std::string tail_;
};

}  // namespace kamera
