#include "media/image.h"

#include <cstring>

#include "media/media_file.h"

namespace kamera {

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (b.size() >= 8 && std::memcmp(b.data(), png_sig, 8) == 0) return ImageFormat::Png;
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return ImageFormat::Jpeg;
  return ImageFormat::Unknown;
}

Status check_image_dims(int64_t width, int64_t height, std::string_view name,
                        const DecodeLimits& limits) {
  if (width <= 0 || height <= 0)
    return make_error(ErrorCode::CorruptData, "{}: image declares {} x {} pixels", name, width,
                      height);
  if (width > limits.max_side || height > limits.max_side)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: image of {} x {} pixels is over the limit of {} pixels a side", name,
                      width, height, limits.max_side);
  if (width * height > limits.max_pixels)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: image of {} x {} = {} pixels is over the limit of {} pixels", name,
                      width, height, width * height, limits.max_pixels);
  return Status::Ok();
}

Result<Image> decode_image(std::span<const uint8_t> bytes, std::string_view name,
                           const DecodeLimits& limits) {
  if (int64_t(bytes.size()) > limits.max_bytes)
    return make_error(ErrorCode::InvalidArgument, "{}: {} bytes is over the limit of {} bytes",
                      name, bytes.size(), limits.max_bytes);
  switch (sniff_image_format(bytes)) {
    case ImageFormat::Png:
      return media_detail::decode_png(bytes, name, limits);
    case ImageFormat::Jpeg:
      return media_detail::decode_jpeg(bytes, name, limits);
    default:
      return make_error(ErrorCode::InvalidArgument,
                        "{}: not a PNG or JPEG image (unknown signature, {} bytes)", name,
                        bytes.size());
  }
}

Result<ImageSize> read_image_size(std::span<const uint8_t> bytes, std::string_view name) {
  switch (sniff_image_format(bytes)) {
    case ImageFormat::Png:
      return media_detail::png_size(bytes, name);
    case ImageFormat::Jpeg:
      return media_detail::jpeg_size(bytes, name);
    default:
      return make_error(ErrorCode::InvalidArgument, "{}: not a PNG or JPEG image", name);
  }
}

Result<Image> load_image(const std::string& path, const DecodeLimits& limits) {
  KAMERA_ASSIGN_OR_RETURN(const auto bytes, read_media_file(path, limits.max_bytes, "image"));
  return decode_image(bytes, path, limits);
}

}  // namespace kamera
