// A media file's bytes, bounded before they are read: what load_image (media/image.h) and
// load_audio (media/audio_file.h) decode.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kamera {

// The bytes of the regular file at `path`. `kind` ("image", "audio") names the file in the
// errors: NotFound (no such file), InvalidArgument (not a regular file; over max_bytes, checked
// on its size before reading), Io.
Result<std::vector<uint8_t>> read_media_file(const std::string& path, int64_t max_bytes,
                                             std::string_view kind);

}  // namespace kamera
