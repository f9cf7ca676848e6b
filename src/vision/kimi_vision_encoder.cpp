#include "vision/kimi_vision_encoder.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "ops/kernels.h"
#include "ops/vision_ops.h"

namespace kamera {

namespace {

void grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// torch's cubic convolution weights (a = -0.75) of the four taps around a source coordinate
// whose fractional part is t.
void cubic_weights(float t, float w[4]) {
  constexpr float A = -0.75f;
  auto near = [](float x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto far = [](float x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

}  // namespace

void kimi_resize_positions(const float* table, int side, int dim, int h, int w, float* out) {
  if (h == side && w == side) {
    std::copy(table, table + size_t(side) * side * dim, out);
    return;
  }
  // separable: per output (y, x), 4 x 4 taps of the table, clamped at its borders
  const float sy = float(side) / float(h), sx = float(side) / float(w);
  std::fill(out, out + size_t(h) * w * dim, 0.0f);
  for (int y = 0; y < h; ++y) {
    const float fy = (float(y) + 0.5f) * sy - 0.5f;
    const int iy = int(std::floor(fy));
    float wy[4];
    cubic_weights(fy - float(iy), wy);
    for (int x = 0; x < w; ++x) {
      const float fx = (float(x) + 0.5f) * sx - 0.5f;
      const int ix = int(std::floor(fx));
      float wx[4];
      cubic_weights(fx - float(ix), wx);
      float* o = out + (size_t(y) * w + x) * dim;
      for (int a = 0; a < 4; ++a) {
        const int ry = std::clamp(iy - 1 + a, 0, side - 1);
        for (int b = 0; b < 4; ++b) {
          const int rx = std::clamp(ix - 1 + b, 0, side - 1);
          const float wt = wy[a] * wx[b];
          const float* t = table + (size_t(ry) * side + rx) * dim;
          for (int d = 0; d < dim; ++d) o[d] += wt * t[d];
        }
      }
    }
  }
}

void kimi_rope(float* x, int n, int n_heads, int head_dim, const int32_t* row, const int32_t* col,
               double theta, ThreadPool* pool) {
  const int quarter = head_dim / 4;
  std::vector<float> freq(static_cast<size_t>(quarter));
  for (int i = 0; i < quarter; ++i)  // f32, as the model's torch.arange(...).float() table
    freq[size_t(i)] = float(1.0 / std::pow(theta, double(4 * i) / head_dim));
  auto run = [&](int64_t a, int64_t e) {
    for (int64_t t = a; t < e; ++t)
      for (int i = 0; i < quarter; ++i) {
        const float ax = float(col[t]) * freq[size_t(i)], ay = float(row[t]) * freq[size_t(i)];
        const float cx = std::cos(ax), sx = std::sin(ax), cy = std::cos(ay), sy = std::sin(ay);
        for (int hh = 0; hh < n_heads; ++hh) {
          float* p = x + (size_t(t) * n_heads + hh) * head_dim + 4 * i;
          const float x0 = p[0], x1 = p[1], y0 = p[2], y1 = p[3];
          p[0] = x0 * cx - x1 * sx;
          p[1] = x0 * sx + x1 * cx;
          p[2] = y0 * cy - y1 * sy;
          p[3] = y0 * sy + y1 * cy;
        }
      }
  };
  if (pool && n >= 64)
    pool->parallel_for(n, run);
  else
    run(0, n);
}

// One block over the n patches; x_ [n x dim] is updated in place.
void KimiVisionEncoder::block(const KimiVisionWeights::Layer& L, int n) {
  const KimiVisionConfig& c = m_.cfg;
  const int d = c.dim, H = c.n_heads, hd = c.head_dim();
  const int64_t nd = int64_t(n) * d;
  // attention: x += W_o attn(rope(W_q n0), rope(W_k n0), W_v n0) + b_o,  n0 = LN0(x)
  layernorm(x_.data(), L.ln1_w.data(), L.ln1_b.data(), nrm_.data(), n, d, c.eps, pool_);
  L.q.apply(nrm_.data(), n, q_.data(), pool_);  // [n x dim] = [n x H x hd]
  L.k.apply(nrm_.data(), n, k_.data(), pool_);
  L.v.apply(nrm_.data(), n, v_.data(), pool_);
  kimi_rope(q_.data(), n, H, hd, row_.data(), col_.data(), c.rope_theta, pool_);
  kimi_rope(k_.data(), n, H, hd, row_.data(), col_.data(), c.rope_theta, pool_);
  grouped_attention(q_.data(), k_.data(), v_.data(), att_.data(), n, H, hd,
                    AttentionGroups{members_, offsets_}, attn_scratch_, pool_);
  L.o.apply(att_.data(), n, nrm_.data(), pool_);
  add_inplace(x_.data(), nrm_.data(), nd);
  // MLP: x += W_fc1 gelu_tanh(W_fc0 LN1(x) + b) + b
  layernorm(x_.data(), L.ln2_w.data(), L.ln2_b.data(), nrm_.data(), n, d, c.eps, pool_);
  L.fc0.apply(nrm_.data(), n, h1_.data(), pool_);  // [n x ffn]
  gelu_tanh_inplace(h1_.data(), int64_t(n) * c.ffn_dim, pool_);
  L.fc1.apply(h1_.data(), n, att_.data(), pool_);  // [n x dim]
  add_inplace(x_.data(), att_.data(), nd);
}

Result<KimiVisionEmbeddings> KimiVisionEncoder::encode(const KimiPatches& in) {
  const KimiVisionConfig& c = m_.cfg;
  const int m = c.merge, gh = in.grid_h, gw = in.grid_w;
  if (in.patch_values != c.patch_values() || gh < m || gw < m || gh % m || gw % m ||
      in.values.size() != size_t(in.n_patches()) * in.patch_values)
    return make_error(ErrorCode::InvalidArgument,
                      "kimi vision encode: {} x {} patches of {} values do not fit this tower "
                      "(patch values {}, merge {})",
                      gh, gw, in.patch_values, c.patch_values(), m);
  const int n = gh * gw, d = c.dim;
  for (auto* v : {&x_, &nrm_, &q_, &k_, &v_, &att_, &pos_}) grow(*v, size_t(n) * d);
  grow(h1_, size_t(n) * c.ffn_dim);
  row_.resize(size_t(n));
  col_.resize(size_t(n));
  members_.resize(size_t(n));
  for (int i = 0; i < n; ++i) {
    row_[size_t(i)] = i / gw;
    col_[size_t(i)] = i % gw;
    members_[size_t(i)] = i;
  }
  offsets_ = {0, n};
  // x = W_pe p + b + pos(gh, gw)
  m_.w.patch.apply(in.values.data(), n, x_.data(), pool_);
  kimi_resize_positions(m_.w.pos.data(), c.pos_side, d, gh, gw, pos_.data());
  add_inplace(x_.data(), pos_.data(), int64_t(n) * d);
  for (const auto& L : m_.w.layers) {
    if (stop_ && stop_())
      return make_error(ErrorCode::InvalidArgument, "kimi vision encode: stopped before its end");
    block(L, n);
  }
  layernorm(x_.data(), m_.w.post_ln_w.data(), m_.w.post_ln_b.data(), x_.data(), n, d, c.eps, pool_);
  // the projector: pre_norm per patch, then each m x m block's patches side by side
  layernorm(x_.data(), m_.w.mm_norm_w.data(), m_.w.mm_norm_b.data(), nrm_.data(), n, d, c.proj_eps,
            pool_);
  KimiVisionEmbeddings e;
  e.grid_h = gh / m;
  e.grid_w = gw / m;
  e.dim = c.out_dim;
  const int nt = int(e.n_rows()), mw = c.merged_width();
  grow(merged_, size_t(nt) * mw);
  for (int ty = 0; ty < e.grid_h; ++ty)
    for (int tx = 0; tx < e.grid_w; ++tx)
      for (int dy = 0; dy < m; ++dy)
        for (int dx = 0; dx < m; ++dx) {
          const float* src = nrm_.data() + (size_t(ty * m + dy) * gw + tx * m + dx) * d;
          float* dst = merged_.data() + (size_t(ty) * e.grid_w + tx) * mw + (dy * m + dx) * d;
          std::copy(src, src + d, dst);
        }
  grow(h1_, size_t(nt) * mw);
  m_.w.mm1.apply(merged_.data(), nt, h1_.data(), pool_);  // [nt x mw]
  gelu_erf_inplace(h1_.data(), int64_t(nt) * mw, pool_);
  e.rows.resize(size_t(nt) * e.dim);
  m_.w.mm2.apply(h1_.data(), nt, e.rows.data(), pool_);
  return e;
}

}  // namespace kamera
