#include "vision/kimi_preprocess.h"

#include <cmath>

#include "media/resize.h"

namespace kamera {

Result<std::pair<int, int>> kimi_target_size(int width, int height, const KimiVisionConfig& c) {
  if (width < 1 || height < 1)
    return make_error(ErrorCode::InvalidArgument, "kimi preprocess: image of {} x {}", width,
                      height);
  const int64_t patches = int64_t(width / c.patch) * (height / c.patch);
  if (patches <= c.in_token_limit) return std::pair{width, height};
  const double scale = std::sqrt(double(c.in_token_limit) / double(patches));
  const int w = int(width * scale), h = int(height * scale);  // Python int(): truncation
  if (w < 1 || h < 1)
    return make_error(ErrorCode::InvalidArgument,
                      "kimi preprocess: a {} x {} image scales to {} x {}", width, height, w, h);
  return std::pair{w, h};
}

Result<int64_t> kimi_picture_rows(int width, int height, const KimiVisionConfig& c) {
  KAMERA_ASSIGN_OR_RETURN(const auto size, kimi_target_size(width, height, c));
  const int unit = c.merge * c.patch;
  const int64_t gw = (size.first + unit - 1) / unit, gh = (size.second + unit - 1) / unit;
  if (gw * c.merge >= 512 || gh * c.merge >= 512)
    return make_error(ErrorCode::InvalidArgument,
                      "kimi preprocess: a grid of {} x {} patches exceeds the tower's rotary "
                      "table (under 512 a side)",
                      gw * c.merge, gh * c.merge);
  return gw * gh;
}

Result<KimiPatches> kimi_preprocess_image(const Image& image, const KimiVisionConfig& c) {
  KAMERA_ASSIGN_OR_RETURN(const auto size, kimi_target_size(image.width, image.height, c));
  Image resized;
  const Image* src = &image;
  if (size.first != image.width || size.second != image.height) {
    KAMERA_ASSIGN_OR_RETURN(resized, resize_bicubic(image, size.first, size.second));
    src = &resized;
  }
  const int unit = c.merge * c.patch, p = c.patch;
  KimiPatches out;
  out.width = src->width;
  out.height = src->height;
  const int W = (src->width + unit - 1) / unit * unit, H = (src->height + unit - 1) / unit * unit;
  out.grid_w = W / p;
  out.grid_h = H / p;
  if (out.grid_w >= 512 || out.grid_h >= 512)
    return make_error(ErrorCode::InvalidArgument,
                      "kimi preprocess: a grid of {} x {} patches exceeds the tower's rotary "
                      "table (under 512 a side)",
                      out.grid_w, out.grid_h);
  out.patch_values = c.patch_values();
  out.values.resize(size_t(out.n_patches()) * out.patch_values);
  float pad[3];  // a padded (black) pixel, normalized
  for (int ch = 0; ch < 3; ++ch)
    pad[ch] = (0.0f - c.image_mean[size_t(ch)]) / c.image_std[size_t(ch)];
  for (int gy = 0; gy < out.grid_h; ++gy)
    for (int gx = 0; gx < out.grid_w; ++gx) {
      float* dst = out.values.data() + (size_t(gy) * out.grid_w + gx) * out.patch_values;
      for (int ch = 0; ch < 3; ++ch)
        for (int py = 0; py < p; ++py)
          for (int px = 0; px < p; ++px) {
            const int x = gx * p + px, y = gy * p + py;
            float v = pad[ch];
            if (x < src->width && y < src->height) {
              const float t = float(src->at(x, y)[ch]) / 255.0f;  // to_tensor, f32
              v = (t - c.image_mean[size_t(ch)]) / c.image_std[size_t(ch)];
            }
            dst[(size_t(ch) * p + py) * p + px] = v;
          }
    }
  return out;
}

}  // namespace kamera
