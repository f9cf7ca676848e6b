#include "vision/qwen_vision_encoder.h"

#include <algorithm>

#include "ops/kernels.h"
#include "ops/vision_ops.h"

namespace kamera {

void QwenVisionEncoder::patch_positions(int grid_h, int grid_w, int merge,
                                        std::vector<int32_t>* row, std::vector<int32_t>* col) {
  row->clear();
  col->clear();
  for (int hb = 0; hb < grid_h / merge; ++hb)
    for (int wb = 0; wb < grid_w / merge; ++wb)
      for (int dy = 0; dy < merge; ++dy)
        for (int dx = 0; dx < merge; ++dx) {
          row->push_back(hb * merge + dy);
          col->push_back(wb * merge + dx);
        }
}

void QwenVisionEncoder::window_groups(const QwenVisionConfig& c, int grid_h, int grid_w,
                                      std::vector<int32_t>* members,
                                      std::vector<int32_t>* offsets) {
  const int unit = c.merge * c.merge;             // patches per merged token
  const int side = c.window / c.merge / c.patch;  // merged tokens per window side
  const int mh = grid_h / c.merge, mw = grid_w / c.merge;
  members->clear();
  offsets->assign(1, 0);
  for (int wy = 0; wy < mh; wy += side)
    for (int wx = 0; wx < mw; wx += side) {
      for (int y = wy; y < std::min(wy + side, mh); ++y)
        for (int x = wx; x < std::min(wx + side, mw); ++x)
          for (int u = 0; u < unit; ++u) members->push_back((y * mw + x) * unit + u);
      offsets->push_back(int32_t(members->size()));
    }
}

namespace {

void grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// LayerNorm (Qwen2-VL) or RMSNorm (Qwen2.5-VL) of n rows.
void norm(const QwenVisionConfig& c, const std::vector<float>& w, const std::vector<float>& b,
          const float* x, float* y, int n, ThreadPool* pool) {
  if (c.rms_norm())
    rmsnorm(x, w.data(), y, n, c.dim, c.eps, pool);
  else
    layernorm(x, w.data(), b.empty() ? nullptr : b.data(), y, n, c.dim, c.eps, pool);
}

}  // namespace

// One block over n patches of one slice; x_ [n x dim] is updated in place.
void QwenVisionEncoder::block(const QwenVisionWeights::Layer& L, bool full, int n) {
  const QwenVisionConfig& c = m_.cfg;
  const int d = c.dim, f = c.ffn_dim, H = c.n_heads, hd = c.head_dim();
  const int64_t nd = int64_t(n) * d, nf = int64_t(n) * f;
  // attention: x += W_o attn(rope(W_q n1), rope(W_k n1), W_v n1),  n1 = Norm1(x)
  norm(c, L.ln1_w, L.ln1_b, x_.data(), nrm_.data(), n, pool_);
  L.q.apply(nrm_.data(), n, q_.data(), pool_);  // [n x dim] = [n x H x hd]
  L.k.apply(nrm_.data(), n, k_.data(), pool_);
  L.v.apply(nrm_.data(), n, v_.data(), pool_);
  vision_rope(q_.data(), n, H, hd, row_, col_, c.rope_theta, pool_);
  vision_rope(k_.data(), n, H, hd, row_, col_, c.rope_theta, pool_);
  const AttentionGroups groups = full ? AttentionGroups{all_members_, all_offsets_}
                                      : AttentionGroups{win_members_, win_offsets_};
  grouped_attention(q_.data(), k_.data(), v_.data(), att_.data(), n, H, hd, groups, attn_scratch_,
                    pool_);
  L.o.apply(att_.data(), n, nrm_.data(), pool_);
  add_inplace(x_.data(), nrm_.data(), nd);
  // FFN: x += FFN(Norm2(x))
  norm(c, L.ln2_w, L.ln2_b, x_.data(), nrm_.data(), n, pool_);
  if (c.act == QwenVisionAct::SiluGated) {
    L.gate.apply(nrm_.data(), n, h1_.data(), pool_);  // [n x ffn]
    L.up.apply(nrm_.data(), n, h2_.data(), pool_);
    silu_mul(h1_.data(), h2_.data(), nf, pool_);
  } else {
    L.up.apply(nrm_.data(), n, h1_.data(), pool_);  // fc1: [n x ffn]
    if (c.act == QwenVisionAct::Gelu)
      gelu_erf_inplace(h1_.data(), nf, pool_);
    else
      quick_gelu_inplace(h1_.data(), nf, pool_);
  }
  L.down.apply(h1_.data(), n, att_.data(), pool_);  // [n x dim]
  add_inplace(x_.data(), att_.data(), nd);
}

// patches: (grid_h x grid_w) x patch_values of one slice; out: (grid_h/m x grid_w/m) x out_dim.
void QwenVisionEncoder::encode_slice(const float* patches, int grid_h, int grid_w, float* out) {
  const QwenVisionConfig& c = m_.cfg;
  const int n = grid_h * grid_w, d = c.dim, unit = c.merge * c.merge;
  for (auto* v : {&x_, &nrm_, &q_, &k_, &v_, &att_}) grow(*v, size_t(n) * d);
  grow(h1_, size_t(n) * std::max(c.ffn_dim, d));
  if (c.act == QwenVisionAct::SiluGated) grow(h2_, size_t(n) * c.ffn_dim);
  patch_positions(grid_h, grid_w, c.merge, &row_, &col_);
  all_members_.resize(size_t(n));
  for (int i = 0; i < n; ++i) all_members_[size_t(i)] = i;
  all_offsets_ = {0, n};
  if (c.variant == QwenVisionVariant::Qwen25VL)
    window_groups(c, grid_h, grid_w, &win_members_, &win_offsets_);

  m_.w.patch.apply(patches, n, x_.data(), pool_);  // x = W_pe p: [n x dim]
  for (int l = 0; l < c.n_layers; ++l) block(m_.w.layers[size_t(l)], c.full_attention(l), n);
  // merger: Norm(x), each merged token = its `unit` consecutive patches side by side
  norm(c, m_.w.post_ln_w, m_.w.post_ln_b, x_.data(), nrm_.data(), n, pool_);
  const int nt = n / unit;
  m_.w.mm0.apply(nrm_.data(), nt, h1_.data(), pool_);  // [nt x unit*dim]
  gelu_erf_inplace(h1_.data(), int64_t(nt) * c.merged_width(), pool_);
  m_.w.mm2.apply(h1_.data(), nt, out, pool_);  // [nt x out_dim]
}

Result<QwenVisionEmbeddings> QwenVisionEncoder::encode(const QwenPatches& in) {
  const QwenVisionConfig& c = m_.cfg;
  const int fm = c.merge;
  if (in.patch_values != c.patch_values() || in.grid_t < 1 || in.grid_h < fm || in.grid_w < fm ||
      in.grid_h % fm != 0 || in.grid_w % fm != 0 ||
      in.values.size() != size_t(in.n_patches()) * in.patch_values)
    return make_error(ErrorCode::InvalidArgument,
                      "vision encode: patches {} x {} x {} of {} values do not fit this tower "
                      "(patch values {}, merge {})",
                      in.grid_t, in.grid_h, in.grid_w, in.patch_values, c.patch_values(), fm);
  QwenVisionEmbeddings e;
  e.grid_t = in.grid_t;
  e.grid_h = in.grid_h / fm;
  e.grid_w = in.grid_w / fm;
  e.dim = c.out_dim;
  e.rows.resize(size_t(e.n_rows()) * e.dim);
  const size_t slice_in = size_t(in.grid_h) * in.grid_w * in.patch_values;
  const size_t slice_out = size_t(e.grid_h) * e.grid_w * e.dim;
  for (int t = 0; t < in.grid_t; ++t)
    encode_slice(in.values.data() + t * slice_in, in.grid_h, in.grid_w,
                 e.rows.data() + t * slice_out);
  return e;
}

}  // namespace kamera
