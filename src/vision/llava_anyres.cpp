#include "vision/llava_anyres.h"

#include <algorithm>
#include <cmath>

#include "media/resize.h"

namespace kamera {

namespace {

// Hugging Face's select_best_resolution over the pinpoints read as (height, width).
std::array<int, 2> best_resolution(int width, int height, const LlavaVisionConfig& c) {
  std::array<int, 2> best{};  // (w, h)
  int64_t max_eff = 0, min_waste = INT64_MAX;
  const int64_t area = int64_t(width) * height;
  for (const auto& [h, w] : c.pinpoints) {
    const double scale = std::min(double(w) / width, double(h) / height);
    const int64_t eff =
        std::min(int64_t(double(width) * scale) * int64_t(double(height) * scale), area);
    const int64_t waste = int64_t(w) * h - eff;
    if (eff > max_eff || (eff == max_eff && waste < min_waste)) {
      max_eff = eff, min_waste = waste;
      best = {w, h};
    }
  }
  return best;
}

// unpad_image's box over the current_h x current_w features of a width x height picture.
void unpad(int width, int height, int current_h, int current_w, LlavaAnyresPlan* p) {
  auto round7 = [](double v) { return int(std::nearbyint(v * 1e7) / 1e7); };
  p->r0 = 0, p->r1 = current_h, p->c0 = 0, p->c1 = current_w;
  if (double(width) / height > double(current_w) / current_h) {
    const int new_h = round7(height * (double(current_w) / width));
    const int pad = (current_h - new_h) / 2;
    p->r0 = pad, p->r1 = current_h - pad;
  } else {
    const int new_w = round7(width * (double(current_h) / height));
    const int pad = (current_w - new_w) / 2;
    p->c0 = pad, p->c1 = current_w - pad;
  }
}

// `img` scaled to fit w x h (the other side min(ceil(side * scale), its)) with `resize`, centred
// on black (floor offsets).
template <class Resize>
Result<Image> fit_on_black(const Image& img, int w, int h, int new_w, int new_h, Resize resize) {
  if (img.width == w && img.height == h) return img;
  KAMERA_ASSIGN_OR_RETURN(const Image r, resize(img, new_w, new_h));
  Image out;
  out.width = w, out.height = h;
  out.rgb.assign(size_t(w) * h * 3, 0);
  const int x0 = (w - new_w) / 2, y0 = (h - new_h) / 2;
  for (int y = 0; y < new_h; ++y)
    std::copy_n(r.rgb.data() + size_t(y) * new_w * 3, size_t(new_w) * 3,
                out.rgb.data() + (size_t(y + y0) * w + x0) * 3);
  return out;
}

// The image_size tiles of `refined`, row by row.
Result<std::vector<Image>> cut_tiles(const Image& refined, int tile) {
  std::vector<Image> out;
  for (int y = 0; y < refined.height; y += tile)
    for (int x = 0; x < refined.width; x += tile) {
      KAMERA_ASSIGN_OR_RETURN(Image t, crop_image(refined, x, y, tile, tile));
      out.push_back(std::move(t));
    }
  return out;
}

}  // namespace

Result<LlavaAnyresPlan> llava_anyres_plan(int width, int height, const LlavaVisionConfig& c) {
  if (!c.anyres())
    return make_error(ErrorCode::InvalidArgument, "llava: a tower without a grid (LLaVA-1.5)");
  if (width < 1 || height < 1)
    return make_error(ErrorCode::InvalidArgument, "llava: an empty picture");
  LlavaAnyresPlan p;
  const auto [bw, bh] = best_resolution(width, height, c);
  p.best_w = bw, p.best_h = bh;
  const double sw = double(bw) / width, sh = double(bh) / height;
  if (sw < sh)
    p.resized_w = bw, p.resized_h = std::min(int(std::ceil(height * sw)), bh);
  else
    p.resized_h = bh, p.resized_w = std::min(int(std::ceil(width * sh)), bw);
  p.paste_x = (bw - p.resized_w) / 2, p.paste_y = (bh - p.resized_h) / 2;
  p.grid_rows = bh / c.image_size, p.grid_cols = bw / c.image_size;
  unpad(width, height, p.grid_rows * c.side(), p.grid_cols * c.side(), &p);
  return p;
}

Result<std::vector<Image>> llava_anyres_pictures(const Image& img, const LlavaAnyresPlan& p,
                                                 const LlavaVisionConfig& c) {
  KAMERA_ASSIGN_OR_RETURN(const Image refined, fit_on_black(img, p.best_w, p.best_h, p.resized_w,
                                                            p.resized_h, resize_bicubic));
  KAMERA_ASSIGN_OR_RETURN(Image base, resize_bicubic(img, c.image_size, c.image_size));
  KAMERA_ASSIGN_OR_RETURN(std::vector<Image> tiles, cut_tiles(refined, c.image_size));
  tiles.insert(tiles.begin(), std::move(base));
  return tiles;
}

std::vector<float> llava_anyres_pack(const std::vector<std::vector<float>>& encoded,
                                     const LlavaAnyresPlan& p, const LlavaVisionConfig& c,
                                     const std::vector<float>& newline) {
  const int side = c.side();
  const size_t o = size_t(c.out_dim);
  std::vector<float> out(encoded[0]);
  out.reserve(size_t(p.rows(side)) * o);
  for (int y = p.r0; y < p.r1; ++y) {
    for (int x = p.c0; x < p.c1; ++x) {
      const std::vector<float>& tile = encoded[size_t(1 + (y / side) * p.grid_cols + x / side)];
      const float* row = tile.data() + size_t((y % side) * side + x % side) * o;
      out.insert(out.end(), row, row + o);
    }
    out.insert(out.end(), newline.begin(), newline.end());
  }
  return out;
}

}  // namespace kamera
