// RFC 2397 data URLs ("data:image/png;base64,iVBOR...") and strict RFC 4648 base64, for media
// that arrives inline in a request (the server's image_url parts). The decoded size is known from
// the text's length and is checked before anything is allocated.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kamera {

// Bytes a base64 text of this many characters decodes to, at most.
inline size_t base64_max_decoded(size_t chars) {
  return chars / 4 * 3 + 3;
}

// Standard alphabet, '=' padding optional at the end only; ASCII whitespace is skipped (line
// breaks of MIME encoders). Errors (InvalidArgument): any other character, padding in the
// middle, a dangling single character.
Result<std::vector<uint8_t>> base64_decode(std::string_view text);

// Standard alphabet with '=' padding (the server's base64 embeddings).
std::string base64_encode(const void* data, size_t n);

struct DataUrl {
  std::string mime;  // lower-case, parameters dropped ("image/png"); "text/plain" when absent
  bool base64 = false;
  std::string_view payload;  // the text after the comma (a view into the URL)
};

// Splits "data:[<mime>][;param=v]*[;base64],<payload>". Errors: not a data URL, no comma.
Result<DataUrl> parse_data_url(std::string_view url);

}  // namespace kamera
