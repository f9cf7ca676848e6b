#include "vision/gemma3_encoder.h"

#include "media/resize.h"
#include "ops/kernels.h"

namespace kamera {

Result<Image> gemma3_picture(const Image& img, const Gemma3VisionConfig& c) {
  return resize_bilinear(img, c.image_size, c.image_size);
}

Result<std::vector<float>> Gemma3VisionEncoder::encode(const Image& picture) {
  const Gemma3VisionConfig& c = m_.cfg;
  KAMERA_ASSIGN_OR_RETURN(const std::vector<float> x, vit_.encode(picture, stop_, "gemma3"));
  const int d = c.dim, side = c.side(), k = c.pool, rs = c.rows_side(), rows = c.rows();
  // average pooling: block (oy, ox) of k x k patches -> row oy * rs + ox (summed in f32 in the
  // block's raster order, then divided, as ggml_pool_2d)
  pooled_.assign(size_t(rows) * d, 0.0f);
  const float area = float(k * k);
  for (int oy = 0; oy < rs; ++oy)
    for (int ox = 0; ox < rs; ++ox) {
      float* dst = pooled_.data() + (size_t(oy) * rs + ox) * d;
      for (int dy = 0; dy < k; ++dy)
        for (int dx = 0; dx < k; ++dx) {
          const float* src = x.data() + (size_t(oy * k + dy) * side + ox * k + dx) * d;
          for (int i = 0; i < d; ++i) dst[i] += src[i];
        }
      for (int i = 0; i < d; ++i) dst[i] /= area;
    }
  rmsnorm(pooled_.data(), m_.w.soft_norm.data(), pooled_.data(), rows, d, c.eps, pool_);
  std::vector<float> out(size_t(rows) * c.out_dim);
  m_.w.proj.apply(pooled_.data(), rows, out.data(), pool_);
  return out;
}

}  // namespace kamera
