#include "vision/idefics3_encoder.h"

#include <algorithm>

#include "ops/kernels.h"
#include "ops/vision_ops.h"

namespace kamera {

Result<std::vector<float>> idefics3_tile_patches(const Image& tile, const Idefics3VisionConfig& c) {
  if (tile.width != c.image_size || tile.height != c.image_size ||
      tile.rgb.size() != size_t(tile.pixels()) * 3)
    return make_error(ErrorCode::InvalidArgument,
                      "idefics3 vision: a tile is {} x {} pixels, this one {} x {}", c.image_size,
                      c.image_size, tile.width, tile.height);
  const int p = c.patch, side = c.side();
  std::vector<float> out(size_t(c.n_patches()) * c.patch_values());
  for (int gy = 0; gy < side; ++gy)
    for (int gx = 0; gx < side; ++gx) {
      float* dst = out.data() + (size_t(gy) * side + gx) * c.patch_values();
      for (int ch = 0; ch < 3; ++ch)
        for (int py = 0; py < p; ++py)
          for (int px = 0; px < p; ++px) {
            const float t = float(tile.at(gx * p + px, gy * p + py)[ch]) / 255.0f;
            dst[(size_t(ch) * p + py) * p + px] =
                (t - c.image_mean[size_t(ch)]) / c.image_std[size_t(ch)];
          }
    }
  return out;
}

// One pre-LN block over the n patches; x_ [n x dim] is updated in place.
void Idefics3VisionEncoder::block(const Idefics3VisionWeights::Layer& L, int n) {
  const Idefics3VisionConfig& c = m_.cfg;
  const int64_t nd = int64_t(n) * c.dim;
  layernorm(x_.data(), L.ln1_w.data(), L.ln1_b.data(), nrm_.data(), n, c.dim, c.eps, pool_);
  L.q.apply(nrm_.data(), n, q_.data(), pool_);
  L.k.apply(nrm_.data(), n, k_.data(), pool_);
  L.v.apply(nrm_.data(), n, v_.data(), pool_);
  grouped_attention(q_.data(), k_.data(), v_.data(), att_.data(), n, c.n_heads, c.head_dim(),
                    AttentionGroups{members_, offsets_}, attn_scratch_, pool_);
  L.o.apply(att_.data(), n, nrm_.data(), pool_);
  add_inplace(x_.data(), nrm_.data(), nd);
  layernorm(x_.data(), L.ln2_w.data(), L.ln2_b.data(), nrm_.data(), n, c.dim, c.eps, pool_);
  L.fc1.apply(nrm_.data(), n, h1_.data(), pool_);
  gelu_tanh_inplace(h1_.data(), int64_t(n) * c.ffn_dim, pool_);
  L.fc2.apply(h1_.data(), n, att_.data(), pool_);
  add_inplace(x_.data(), att_.data(), nd);
}

Result<std::vector<float>> Idefics3VisionEncoder::encode(const Image& tile) {
  const Idefics3VisionConfig& c = m_.cfg;
  KAMERA_ASSIGN_OR_RETURN(const std::vector<float> patches, idefics3_tile_patches(tile, c));
  const int n = c.n_patches(), d = c.dim, side = c.side(), s = c.scale;
  for (auto* v : {&x_, &nrm_, &q_, &k_, &v_, &att_}) v->resize(size_t(n) * d);
  h1_.resize(size_t(n) * c.ffn_dim);
  members_.resize(size_t(n));
  for (int i = 0; i < n; ++i) members_[size_t(i)] = i;
  offsets_ = {0, n};
  m_.w.patch.apply(patches.data(), n, x_.data(), pool_);  // the Conv2d, bias included
  add_inplace(x_.data(), m_.w.pos.data(), int64_t(n) * d);
  for (const auto& L : m_.w.layers) {
    if (stop_ && stop_())
      return make_error(ErrorCode::InvalidArgument,
                        "idefics3 vision encode: stopped before its end");
    block(L, n);
  }
  layernorm(x_.data(), m_.w.post_ln_w.data(), m_.w.post_ln_b.data(), x_.data(), n, d, c.eps, pool_);
  // pixel shuffle: block (ty, tx) -> one row, patch (dy, dx) at offset (dy s + dx) d
  const int bs = side / s, rows = bs * bs, mw = c.merged_width();
  merged_.resize(size_t(rows) * mw);
  for (int ty = 0; ty < bs; ++ty)
    for (int tx = 0; tx < bs; ++tx)
      for (int dy = 0; dy < s; ++dy)
        for (int dx = 0; dx < s; ++dx) {
          const float* src = x_.data() + (size_t(ty * s + dy) * side + tx * s + dx) * d;
          std::copy(src, src + d,
                    merged_.data() + (size_t(ty) * bs + tx) * mw + size_t(dy * s + dx) * d);
        }
  std::vector<float> out(size_t(rows) * c.out_dim);
  m_.w.proj.apply(merged_.data(), rows, out.data(), pool_);
  return out;
}

}  // namespace kamera
