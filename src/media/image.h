// Decoded images: PNG (libpng) and JPEG (libjpeg-turbo) bytes to row-major RGB8, with a bounded
// cost on hostile input.
//
// The media layer sits below vision/ and depends on core only: whoever receives pixels (the CLI,
// the server, the C API) can decode and validate them without loading a model.
//
// Conversions (the result is always 3 channels, 8 bits, as PIL's Image.convert("RGB") gives):
//   grey, grey+alpha  -> replicated to R = G = B
//   palette           -> expanded through the palette
//   alpha (RGBA, tRNS) -> dropped (not composited), as PIL's convert("RGB") does
//   16-bit PNG        -> the high byte of each sample
//   JPEG YCbCr, grey  -> RGB by libjpeg's own conversion (the same library and settings PIL uses)
//   JPEG CMYK / YCCK  -> refused (Unsupported)
//
// Bounded cost: the declared width and height are checked against DecodeLimits before any pixel
// buffer is allocated (a tiny file that declares a huge image, a "decompression bomb", fails in
// microseconds), libpng's ancillary-chunk memory is capped, a progressive JPEG may have at most
// kMaxJpegScans scans, libjpeg's working memory is capped, and a truncated file is an error, never
// a partly grey image.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kamera {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // height x width x 3, row-major

  int64_t pixels() const { return int64_t(width) * height; }
  const uint8_t* at(int x, int y) const { return rgb.data() + (size_t(y) * width + x) * 3; }
};

struct DecodeLimits {
  int64_t max_bytes = int64_t(64) << 20;  // encoded file size
  int64_t max_pixels = 40'000'000;        // width * height of the decoded image
  int max_side = 20'000;                  // width and height each
};

enum class ImageFormat { Unknown, Png, Jpeg };

// The format from the first bytes ("\x89PNG\r\n\x1a\n", or a JPEG SOI marker FF D8 FF).
ImageFormat sniff_image_format(std::span<const uint8_t> bytes);

// Decodes PNG or JPEG bytes. `name` (a path, "request image 2", ...) starts every error message.
// Errors: InvalidArgument (over a limit, unknown format), CorruptData (malformed or truncated),
// Unsupported (a well-formed variant kamera does not convert, e.g. CMYK JPEG).
Result<Image> decode_image(std::span<const uint8_t> bytes, std::string_view name,
                           const DecodeLimits& limits = {});

// Reads and decodes a file (the size is checked against max_bytes before reading).
Result<Image> load_image(const std::string& path, const DecodeLimits& limits = {});

// The width and height a PNG (IHDR) or JPEG (its SOF) declares, read by libpng / libjpeg from the
// header alone: no pixel is decoded and no pixel buffer allocated, so a caller can bound what the
// picture will cost (its decoded bytes, what a vision tower makes of its size) before paying for
// it. Errors: InvalidArgument (not PNG nor JPEG), CorruptData (a malformed or truncated header).
struct ImageSize {
  int64_t width = 0, height = 0;
  int64_t rgb_bytes() const { return width * height * 3; }
};
Result<ImageSize> read_image_size(std::span<const uint8_t> bytes, std::string_view name);

// Checks declared dimensions against the limits (used by both decoders before allocating).
Status check_image_dims(int64_t width, int64_t height, std::string_view name,
                        const DecodeLimits& limits);

namespace media_detail {
inline constexpr int kMaxJpegScans = 500;
Result<Image> decode_png(std::span<const uint8_t> bytes, std::string_view name,
                         const DecodeLimits& limits);
Result<Image> decode_jpeg(std::span<const uint8_t> bytes, std::string_view name,
                          const DecodeLimits& limits);
Result<ImageSize> png_size(std::span<const uint8_t> bytes, std::string_view name);
Result<ImageSize> jpeg_size(std::span<const uint8_t> bytes, std::string_view name);
}  // namespace media_detail

}  // namespace kamera
