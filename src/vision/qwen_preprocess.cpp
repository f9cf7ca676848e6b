#include "vision/qwen_preprocess.h"

#include <algorithm>
#include <cmath>

#include "media/resize.h"

namespace kamera {

QwenImageOptions QwenImageOptions::from(const QwenVisionConfig& c) {
  QwenImageOptions o;
  o.patch = c.patch;
  o.merge = c.merge;
  o.temporal_patch = c.temporal_patch;
  o.min_pixels = c.min_pixels;
  o.max_pixels = c.max_pixels;
  o.mean = c.image_mean;
  o.std = c.image_std;
  return o;
}

namespace {

// Python's round() of a double: half to even.
int64_t round_half_even(double x) {
  return int64_t(std::nearbyint(x));
}

}  // namespace

Result<ResizedSize> qwen_smart_resize(int height, int width, int factor, int64_t min_pixels,
                                      int64_t max_pixels) {
  if (height < 1 || width < 1 || factor < 1)
    return make_error(ErrorCode::InvalidArgument, "smart_resize: image of {} x {} (factor {})",
                      width, height, factor);
  if (double(std::max(height, width)) / std::min(height, width) > 200.0)
    return make_error(ErrorCode::InvalidArgument,
                      "smart_resize: aspect ratio of a {} x {} image is over 200", width, height);
  int64_t h = round_half_even(double(height) / factor) * factor;
  int64_t w = round_half_even(double(width) / factor) * factor;
  if (h * w > max_pixels) {
    const double beta = std::sqrt(double(height) * width / double(max_pixels));
    h = std::max<int64_t>(factor, int64_t(std::floor(height / beta / factor)) * factor);
    w = std::max<int64_t>(factor, int64_t(std::floor(width / beta / factor)) * factor);
  } else if (h * w < min_pixels) {
    const double beta = std::sqrt(double(min_pixels) / (double(height) * width));
    h = int64_t(std::ceil(height * beta / factor)) * factor;
    w = int64_t(std::ceil(width * beta / factor)) * factor;
  }
  if (h > (1 << 16) || w > (1 << 16))
    return make_error(ErrorCode::InvalidArgument, "smart_resize: {} x {} gives {} x {}", width,
                      height, w, h);
  return ResizedSize{int(h), int(w)};
}

Result<int64_t> qwen_picture_rows(int width, int height, int n_frames,
                                  const QwenImageOptions& opt) {
  KAMERA_ASSIGN_OR_RETURN(const ResizedSize r, qwen_smart_resize(height, width, opt.factor(),
                                                                 opt.min_pixels, opt.max_pixels));
  const int64_t slices = (std::max(1, n_frames) + opt.temporal_patch - 1) / opt.temporal_patch;
  return slices * (r.height / opt.factor()) * (r.width / opt.factor());
}

float qwen_normalize(uint8_t v, int c, const QwenImageOptions& opt) {
  const float x = float(double(v) * (1.0 / 255.0));  // rescale in double, stored as f32
  return (x - opt.mean[size_t(c)]) / opt.std[size_t(c)];
}

QwenPatches qwen_patchify(std::span<const Image> resized, const QwenImageOptions& opt) {
  const int p = opt.patch, m = opt.merge, tp = opt.temporal_patch;
  const int H = resized[0].height, W = resized[0].width;
  QwenPatches out;
  out.grid_t = int((resized.size() + size_t(tp) - 1) / size_t(tp));
  out.grid_h = H / p;
  out.grid_w = W / p;
  out.patch_values = opt.patch_values();
  out.resized_width = W;
  out.resized_height = H;
  out.values.resize(size_t(out.n_patches()) * out.patch_values);
  // Per-channel lookup of the 256 normalised values.
  float lut[3][256];
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) lut[c][v] = qwen_normalize(uint8_t(v), c, opt);
  float* dst = out.values.data();
  for (int t = 0; t < out.grid_t; ++t)
    for (int hb = 0; hb < out.grid_h / m; ++hb)
      for (int wb = 0; wb < out.grid_w / m; ++wb)
        for (int dy = 0; dy < m; ++dy)
          for (int dx = 0; dx < m; ++dx) {
            const int y0 = (hb * m + dy) * p, x0 = (wb * m + dx) * p;
            for (int c = 0; c < 3; ++c)
              for (int f = 0; f < tp; ++f) {
                // an odd frame count repeats the last frame
                const size_t fi = std::min(size_t(t * tp + f), resized.size() - 1);
                const Image& img = resized[fi];
                for (int py = 0; py < p; ++py)
                  for (int px = 0; px < p; ++px) *dst++ = lut[c][img.at(x0 + px, y0 + py)[c]];
              }
          }
  return out;
}

Result<QwenPatches> qwen_preprocess_frames(std::span<const Image> frames,
                                           const QwenImageOptions& opt) {
  if (frames.empty()) return make_error(ErrorCode::InvalidArgument, "preprocess: no frames");
  KAMERA_ASSIGN_OR_RETURN(const ResizedSize size,
                          qwen_smart_resize(frames[0].height, frames[0].width, opt.factor(),
                                            opt.min_pixels, opt.max_pixels));
  std::vector<Image> resized;
  resized.reserve(frames.size());
  for (const Image& f : frames) {
    KAMERA_ASSIGN_OR_RETURN(Image r, resize_bicubic(f, size.width, size.height));
    resized.push_back(std::move(r));
  }
  return qwen_patchify(resized, opt);
}

Result<QwenPatches> qwen_preprocess_image(const Image& image, const QwenImageOptions& opt) {
  return qwen_preprocess_frames(std::span<const Image>(&image, 1), opt);
}

Result<std::vector<int>> qwen_sample_frames(int n_frames, double source_fps, double target_fps,
                                            int min_frames, int max_frames) {
  if (n_frames < 1 || !(source_fps > 0) || !(target_fps > 0))
    return make_error(ErrorCode::InvalidArgument,
                      "frame sampling: {} frames at {} fps sampled at {} fps", n_frames, source_fps,
                      target_fps);
  constexpr int kFactor = 2;
  const double lo = std::ceil(double(min_frames) / kFactor) * kFactor;
  const double hi = std::floor(double(std::min(max_frames, n_frames)) / kFactor) * kFactor;
  double n = n_frames / source_fps * target_fps;
  n = std::min(std::min(std::max(n, lo), hi), double(n_frames));
  const int count = int(std::floor(n / kFactor)) * kFactor;
  if (count < kFactor || count > n_frames)
    return make_error(ErrorCode::InvalidArgument,
                      "frame sampling: {} frames at {} fps give {} samples (need 2 to {})",
                      n_frames, source_fps, count, n_frames);
  // torch.linspace(0, n_frames - 1, count) in f32 (first half from the start, second half from
  // the end), then round half to even.
  std::vector<int> idx(static_cast<size_t>(count));
  const float start = 0.0f, end = float(n_frames - 1);
  const float step = (end - start) / float(count - 1);
  for (int i = 0; i < count; ++i) {
    const float v = i < count / 2 ? start + step * float(i) : end - step * float(count - 1 - i);
    idx[size_t(i)] = int(std::nearbyint(v));
  }
  return idx;
}

}  // namespace kamera
