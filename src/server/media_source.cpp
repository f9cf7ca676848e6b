#include "server/media_source.h"

#include <sys/stat.h>

#include <cctype>
#include <climits>
#include <cstdlib>
#include <fstream>

namespace kamera {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The scheme of "scheme:rest" (RFC 3986 letters), or empty.
std::string scheme_of(std::string_view url) {
  size_t i = 0;
  while (i < url.size() && (std::isalnum(static_cast<unsigned char>(url[i])) || url[i] == '+' ||
                            url[i] == '-' || url[i] == '.'))
    ++i;
  if (i == 0 || i == url.size() || url[i] != ':' ||
      !std::isalpha(static_cast<unsigned char>(url[0])))
    return "";
  return lower(url.substr(0, i));
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The path of a file: URL (file:///p or file://localhost/p), percent-decoded.
Result<std::string> file_url_path(std::string_view url) {
  std::string_view rest = url.substr(5);  // after "file:"
  if (rest.starts_with("//")) {
    rest.remove_prefix(2);
    const size_t slash = rest.find('/');
    const std::string host = lower(rest.substr(0, slash));
    if (slash == std::string_view::npos || (!host.empty() && host != "localhost"))
      return make_error(ErrorCode::InvalidArgument,
                        "a file: URL must name a local absolute path (file:///path)");
    rest.remove_prefix(slash);
  }
  std::string out;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] != '%') {
      out += rest[i];
      continue;
    }
    const int hi = i + 2 < rest.size() ? hex_digit(rest[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_digit(rest[i + 2]) : -1;
    if (lo < 0 || (hi == 0 && lo == 0))
      return make_error(ErrorCode::InvalidArgument, "a file: URL has a bad %-escape");
    out += char(hi * 16 + lo);
    i += 2;
  }
  return out;
}

Result<std::string> real_path(const std::string& p, const char* what) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf))
    return make_error(ErrorCode::NotFound, "{} does not exist (or cannot be resolved)", what);
  return std::string(buf);
}

}  // namespace

MediaUrlKind media_url_kind(std::string_view url) {
  const std::string s = scheme_of(url);
  if (s.empty() || s == "file") return MediaUrlKind::Local;
  if (s == "data") return MediaUrlKind::Data;
  if (s == "http" || s == "https") return MediaUrlKind::Remote;
  return MediaUrlKind::Other;
}

Result<std::string> confined_media_path(const std::string& dir, std::string_view ref) {
  std::string path(ref);
  if (scheme_of(ref) == "file") {
    KAMERA_ASSIGN_OR_RETURN(path, file_url_path(ref));
  }
  if (path.empty() || path.find('\0') != std::string::npos)
    return make_error(ErrorCode::InvalidArgument, "an empty or malformed local media path");
  KAMERA_ASSIGN_OR_RETURN(const std::string root, real_path(dir, "the media directory"));
  if (path[0] != '/') path = root + "/" + path;
  KAMERA_ASSIGN_OR_RETURN(const std::string real, real_path(path, "the local media file"));
  if (real.size() <= root.size() || real.compare(0, root.size(), root) != 0 ||
      (root != "/" && real[root.size()] != '/'))
    return make_error(ErrorCode::InvalidArgument,
                      "the local media path lies outside the allowed media directory");
  struct stat st {};
  if (::stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return make_error(ErrorCode::InvalidArgument, "the local media path is not a regular file");
  return real;
}

Result<std::vector<uint8_t>> read_media_file(const std::string& path, size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(ErrorCode::NotFound, "the local media file cannot be read");
  if (size_t(st.st_size) > max_bytes)
    return make_error(ErrorCode::InvalidArgument,
                      "the image file is {} bytes, over the limit of {}", st.st_size, max_bytes);
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> bytes(size_t(st.st_size));
  if (!f.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size())))
    return make_error(ErrorCode::Io, "the local media file cannot be read");
  return bytes;
}

}  // namespace kamera
