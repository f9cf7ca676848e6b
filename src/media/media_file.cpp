#include "media/media_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace kamera {

Result<std::vector<uint8_t>> read_media_file(const std::string& path, int64_t max_bytes,
                                             std::string_view kind) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return make_error(ErrorCode::NotFound, "{}: no such {} file", path, kind);
  if (!S_ISREG(st.st_mode))
    return make_error(ErrorCode::InvalidArgument, "{}: not a regular file", path);
  if (int64_t(st.st_size) > max_bytes)
    return make_error(ErrorCode::InvalidArgument, "{}: {} bytes is over the limit of {} bytes",
                      path, int64_t(st.st_size), max_bytes);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return make_error(ErrorCode::Io, "{}: cannot open: {}", path, std::strerror(errno));
  std::vector<uint8_t> bytes(size_t(st.st_size));
  if (!bytes.empty() && std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    return make_error(ErrorCode::Io, "{}: short read", path);
  return bytes;
}

}  // namespace kamera
