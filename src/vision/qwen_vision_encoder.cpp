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
    else if (c.act == QwenVisionAct::GeluTanh)
      gelu_tanh_inplace(h1_.data(), nf, pool_);
    else
      quick_gelu_inplace(h1_.data(), nf, pool_);
  }
  L.down.apply(h1_.data(), n, att_.data(), pool_);  // [n x dim]
  add_inplace(x_.data(), att_.data(), nd);
}

void QwenVisionEncoder::position_weights(int side, int n, std::vector<int32_t>* lo,
                                         std::vector<int32_t>* hi, std::vector<float>* frac) {
  lo->resize(size_t(n));
  hi->resize(size_t(n));
  frac->resize(size_t(n));
  // torch.linspace(0, side - 1, n) in f32: start + i step in the first half, end - (n-1-i) step
  // in the second
  const float end = float(side - 1), step = n > 1 ? end / float(n - 1) : 0.0f;
  for (int i = 0; i < n; ++i) {
    const float v = i < n / 2 ? float(i) * step : end - float(n - 1 - i) * step;
    const int f = int(v);
    (*lo)[size_t(i)] = f;
    (*hi)[size_t(i)] = std::min(f + 1, side - 1);
    (*frac)[size_t(i)] = v - float(f);
  }
}

// Qwen3-VL: x_ += the position table resampled to this slice's grid (qwen_vision.h), each patch
// at its (row_, col_): the four corners weighted as Hugging Face's fast_pos_embed_interpolate.
void QwenVisionEncoder::add_positions(int grid_h, int grid_w) {
  const QwenVisionConfig& c = m_.cfg;
  const int d = c.dim, S = c.pos_side(), n = grid_h * grid_w;
  std::vector<int32_t> hl, hh, wl, wh;
  std::vector<float> dh, dw;
  position_weights(S, grid_h, &hl, &hh, &dh);
  position_weights(S, grid_w, &wl, &wh, &dw);
  const float* P = m_.w.pos_embd.data();
  for (int i = 0; i < n; ++i) {
    const size_t r = size_t(row_[size_t(i)]), k = size_t(col_[size_t(i)]);
    const int idx[4] = {hl[r] * S + wl[k], hl[r] * S + wh[k], hh[r] * S + wl[k], hh[r] * S + wh[k]};
    const float wt[4] = {(1 - dh[r]) * (1 - dw[k]), (1 - dh[r]) * dw[k], dh[r] * (1 - dw[k]),
                         dh[r] * dw[k]};
    float* x = x_.data() + size_t(i) * d;
    for (int j = 0; j < d; ++j) {
      float p = 0.0f;
      for (int q = 0; q < 4; ++q) p += P[size_t(idx[q]) * d + size_t(j)] * wt[q];
      x[j] += p;
    }
  }
}

// A merger's MLP over nt merged tokens of normed rows (nt x 4 dim): W_2 gelu(W_1 m + b_1) + b_2
// (exact erf GELU), each output row written `stride` floats apart.
void QwenVisionEncoder::merger_mlp(const float* normed, const QwenLinear& fc1,
                                   const QwenLinear& fc2, int nt, float* out, int stride) {
  fc1.apply(normed, nt, h1_.data(), pool_);  // [nt x 4 dim]
  gelu_erf_inplace(h1_.data(), int64_t(nt) * fc1.out, pool_);
  if (stride == fc2.out) {
    fc2.apply(h1_.data(), nt, out, pool_);  // [nt x out_dim]
    return;
  }
  grow(merged_, size_t(nt) * fc2.out);
  fc2.apply(h1_.data(), nt, merged_.data(), pool_);
  for (int t = 0; t < nt; ++t)
    std::copy_n(merged_.data() + size_t(t) * fc2.out, fc2.out, out + size_t(t) * stride);
}

// patches: (grid_h x grid_w) x patch_values of one slice; out: (grid_h/m x grid_w/m) rows of
// embed_width (out_dim, then each deepstack merger's out_dim).
bool QwenVisionEncoder::encode_slice(const float* patches, int grid_h, int grid_w, float* out) {
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

  m_.w.patch.apply(patches, n, x_.data(), pool_);  // x = W_pe p (+ b): [n x dim]
  if (c.qwen3()) add_positions(grid_h, grid_w);
  const int stride = c.embed_width(), nt = n / unit, mw = c.merged_width();
  size_t next_ds = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    if (stop_ && stop_()) return false;
    block(m_.w.layers[size_t(l)], c.full_attention(l), n);
    if (next_ds < c.deepstack_layers.size() && c.deepstack_layers[next_ds] == l) {
      // Qwen3-VL: this layer's own merger, its LayerNorm over the 4 grouped patches
      const auto& ds = m_.w.deepstack[next_ds++];
      layernorm(x_.data(), ds.norm_w.data(), ds.norm_b.data(), nrm_.data(), nt, mw, c.eps, pool_);
      merger_mlp(nrm_.data(), ds.fc1, ds.fc2, nt, out + next_ds * size_t(c.out_dim), stride);
    }
  }
  // merger: Norm(x), each merged token = its `unit` consecutive patches side by side
  norm(c, m_.w.post_ln_w, m_.w.post_ln_b, x_.data(), nrm_.data(), n, pool_);
  merger_mlp(nrm_.data(), m_.w.mm0, m_.w.mm2, nt, out, stride);
  return true;
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
  e.dim = c.embed_width();
  e.rows.resize(size_t(e.n_rows()) * e.dim);
  const size_t slice_in = size_t(in.grid_h) * in.grid_w * in.patch_values;
  const size_t slice_out = size_t(e.grid_h) * e.grid_w * e.dim;
  for (int t = 0; t < in.grid_t; ++t)
    if (!encode_slice(in.values.data() + t * slice_in, in.grid_h, in.grid_w,
                      e.rows.data() + t * slice_out))
      return make_error(ErrorCode::InvalidArgument, "vision encode: stopped before its end");
  return e;
}

}  // namespace kamera
