// libFuzzer target for the image decoders (media/): decode arbitrary bytes as PNG or JPEG under
// small limits; when they decode, check the result's shape and resize it. Any crash, sanitizer
// report or leak is a bug, and so is an image over the limits or an error that does not name the
// input.
#include <cstddef>
#include <cstdint>
#include <span>

#include "media/image.h"
#include "media/resize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kamera::DecodeLimits limits;
  limits.max_pixels = 1 << 20;  // keeps each input fast; the checks are the same at any limit
  limits.max_side = 4096;
  auto img = kamera::decode_image(std::span<const uint8_t>(data, size), "fuzz.img", limits);
  if (!img.ok()) {
    if (img.message().rfind("fuzz.img: ", 0) != 0) __builtin_trap();
    return 0;
  }
  if (img->width < 1 || img->height < 1 || img->pixels() > limits.max_pixels ||
      img->rgb.size() != size_t(img->pixels()) * 3)
    __builtin_trap();
  auto small = kamera::resize_bicubic(*img, (img->width + 2) / 3, (img->height + 1) / 2);
  if (!small.ok()) __builtin_trap();
  return 0;
}
