// Where the bytes of a media URL come from, for the server's image parts: inline data URLs
// always; local files only inside the directory given by --allow-local-media; never the network.
//
//   data:image/png;base64,...      decoded (size checked from the text's length first)
//   file:///abs/path, /abs/path,   read only when a media directory is set, and only when the
//   relative/path                  file's real path (symlinks resolved) lies inside the real path
//                                  of that directory; a relative path is taken from it
//   http://, https://, others      refused: the server makes no network requests
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kamera {

enum class MediaUrlKind { Data, Local, Remote, Other };

// The URL's kind by its scheme ("file:" and a string without a scheme are Local).
MediaUrlKind media_url_kind(std::string_view url);

// The file a Local reference names, confined to `dir`. Errors: NotFound (no such file, or the
// directory does not exist), InvalidArgument (outside the directory after resolving "..", and
// symlinks, or not a regular file; a malformed file: URL).
Result<std::string> confined_media_path(const std::string& dir, std::string_view ref);

// The file's bytes; InvalidArgument when it is larger than max_bytes (checked before reading).
Result<std::vector<uint8_t>> read_media_file(const std::string& path, size_t max_bytes);

}  // namespace kamera
