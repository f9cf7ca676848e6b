// PNG bytes -> RGB8 through libpng, errors by setjmp/longjmp kept inside this file.
//
// Only trivially destructible locals live between setjmp and the libpng calls that may longjmp;
// the pixel buffer is owned by the caller's frame, which longjmp returns to.
#include <png.h>

#include <cstdio>
#include <cstring>

#include "media/image.h"

namespace kamera::media_detail {

namespace {

struct PngReader {
  const uint8_t* data;
  size_t size, pos;
  char error[256];
};

void on_error(png_structp png, png_const_charp msg) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(r->error, sizeof(r->error), "%s", msg);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

void on_read(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "file is truncated");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

// Sets the transforms that turn any PNG variant into 8-bit RGB (see image.h).
void set_rgb8_transforms(png_structp png, png_infop info) {
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);
  if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
}

// libpng's read and info structs over `reader`, with the caps on ancillary chunks; false (nothing
// left to free) when libpng could not start. Nothing here can longjmp.
bool start_png(PngReader& reader, png_structp& png, png_infop& info) {
  png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_error, on_warning);
  if (!png) return false;
  info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return false;
  }
  png_set_read_fn(png, &reader, on_read);
  png_set_chunk_malloc_max(png, 8u << 20);  // ancillary chunks (iCCP, zTXt) may not balloon
  png_set_chunk_cache_max(png, 1000);
  return true;
}

}  // namespace

Result<Image> decode_png(std::span<const uint8_t> bytes, std::string_view name,
                         const DecodeLimits& limits) {
  PngReader reader{bytes.data(), bytes.size(), 0, {0}};
  png_structp png = nullptr;
  png_infop info = nullptr;
  if (!start_png(reader, png, info))
    return make_error(ErrorCode::OutOfMemory, "{}: libpng could not start", name);
  Image img;
  std::vector<png_bytep> rows;
  Status dims_status;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return make_error(ErrorCode::CorruptData, "{}: bad PNG: {}", name, reader.error);
  }
  png_read_info(png, info);
  const int64_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  dims_status = check_image_dims(w, h, name, limits);
  if (dims_status.ok()) {
    set_rgb8_transforms(png, info);
    if (png_get_rowbytes(png, info) != size_t(w) * 3) png_error(png, "unexpected row layout");
    img.width = int(w);
    img.height = int(h);
    img.rgb.resize(size_t(w) * size_t(h) * 3);
    rows.resize(size_t(h));
    for (int64_t y = 0; y < h; ++y) rows[size_t(y)] = img.rgb.data() + size_t(y) * size_t(w) * 3;
    png_read_image(png, rows.data());  // trailing chunks after the pixels are not read
  }
  png_destroy_read_struct(&png, &info, nullptr);
  if (!dims_status.ok()) return dims_status.error();
  return img;
}

// IHDR's size: png_read_info stops before the first IDAT chunk.
Result<ImageSize> png_size(std::span<const uint8_t> bytes, std::string_view name) {
  PngReader reader{bytes.data(), bytes.size(), 0, {0}};
  png_structp png = nullptr;
  png_infop info = nullptr;
  if (!start_png(reader, png, info))
    return make_error(ErrorCode::OutOfMemory, "{}: libpng could not start", name);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return make_error(ErrorCode::CorruptData, "{}: bad PNG header: {}", name, reader.error);
  }
  png_read_info(png, info);
  const ImageSize size{int64_t(png_get_image_width(png, info)),
                       int64_t(png_get_image_height(png, info))};
  png_destroy_read_struct(&png, &info, nullptr);
  return size;
}

}  // namespace kamera::media_detail
