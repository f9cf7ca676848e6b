#include "media/data_url.h"

#include <algorithm>
#include <cctype>

namespace kamera {

namespace {

// Value of a base64 character, -1 for anything else.
int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string base64_encode(const void* data, size_t n) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* b = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = uint32_t(b[i]) << 16 | (i + 1 < n ? uint32_t(b[i + 1]) << 8 : 0) |
                       (i + 2 < n ? uint32_t(b[i + 2]) : 0);
    out += kDigits[v >> 18 & 63];
    out += kDigits[v >> 12 & 63];
    out += i + 1 < n ? kDigits[v >> 6 & 63] : '=';
    out += i + 2 < n ? kDigits[v & 63] : '=';
  }
  return out;
}

Result<std::vector<uint8_t>> base64_decode(std::string_view text) {
  std::vector<uint8_t> out;
  out.reserve(base64_max_decoded(text.size()));
  uint32_t acc = 0;
  int bits = 0, pad = 0;
  size_t n_chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_space(c)) continue;
    if (c == '=') {
      ++pad;
      continue;
    }
    const int v = b64_value(c);
    if (v < 0)
      return make_error(ErrorCode::InvalidArgument,
                        "base64: byte {} ({:#04x}) is not in the base64 alphabet", i,
                        static_cast<unsigned char>(c));
    if (pad > 0)
      return make_error(ErrorCode::InvalidArgument, "base64: '=' padding before byte {}", i);
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    ++n_chars;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(uint8_t(acc >> bits));
    }
  }
  if (n_chars % 4 == 1)
    return make_error(ErrorCode::InvalidArgument,
                      "base64: {} characters leave a dangling 6 bits (truncated?)", n_chars);
  if (pad > 2 || (pad > 0 && (n_chars + pad) % 4 != 0))
    return make_error(ErrorCode::InvalidArgument, "base64: wrong '=' padding");
  return out;
}

Result<DataUrl> parse_data_url(std::string_view url) {
  if (url.size() < 5 || lower(url.substr(0, 5)) != "data:")
    return make_error(ErrorCode::InvalidArgument, "not a data: URL");
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos)
    return make_error(ErrorCode::InvalidArgument, "data: URL without a ',' before its payload");
  std::string_view head = url.substr(5, comma - 5);
  DataUrl d;
  d.payload = url.substr(comma + 1);
  const size_t semi = head.find(';');
  d.mime = lower(head.substr(0, semi));
  if (d.mime.empty()) d.mime = "text/plain";
  for (size_t at = semi; at != std::string_view::npos;) {
    const size_t next = head.find(';', at + 1);
    const std::string param = lower(head.substr(
        at + 1, next == std::string_view::npos ? std::string_view::npos : next - at - 1));
    if (param == "base64") d.base64 = true;
    at = next;
  }
  return d;
}

}  // namespace kamera
