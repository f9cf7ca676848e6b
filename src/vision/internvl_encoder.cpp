#include "vision/internvl_encoder.h"

#include "ops/kernels.h"
#include "ops/vision_ops.h"

namespace kamera {

namespace {

// y[r * dim + i] *= s[i] for n rows
void scale_rows(float* y, const std::vector<float>& s, int n) {
  const size_t d = s.size();
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < d; ++i) y[size_t(r) * d + i] *= s[i];
}

}  // namespace

// x_ = the patches' embeddings, then the class token as the last row, each plus its position.
void InternvlVisionEncoder::embed(const std::vector<float>& patches) {
  const InternvlVisionConfig& c = m_.cfg;
  const int n = c.n_patches(), d = c.dim;
  m_.w.patch.apply(patches.data(), n, x_.data(), pool_);  // the Conv2d, bias included
  std::copy(m_.w.cls.begin(), m_.w.cls.end(), x_.begin() + std::ptrdiff_t(size_t(n) * d));
  add_inplace(x_.data(), m_.w.pos.data(), int64_t(n + 1) * d);
}

// One pre-LN block with layer scales over the n + 1 rows; x_ is updated in place.
void InternvlVisionEncoder::block(const InternvlVisionWeights::Layer& L) {
  const InternvlVisionConfig& c = m_.cfg;
  const int n = c.n_patches() + 1;
  const int64_t nd = int64_t(n) * c.dim;
  layernorm(x_.data(), L.ln1_w.data(), L.ln1_b.data(), nrm_.data(), n, c.dim, c.eps, pool_);
  L.q.apply(nrm_.data(), n, q_.data(), pool_);
  L.k.apply(nrm_.data(), n, k_.data(), pool_);
  L.v.apply(nrm_.data(), n, v_.data(), pool_);
  grouped_attention(q_.data(), k_.data(), v_.data(), att_.data(), n, c.n_heads, c.dim / c.n_heads,
                    AttentionGroups{members_, offsets_}, attn_scratch_, pool_);
  L.o.apply(att_.data(), n, nrm_.data(), pool_);
  scale_rows(nrm_.data(), L.ls1, n);
  add_inplace(x_.data(), nrm_.data(), nd);
  layernorm(x_.data(), L.ln2_w.data(), L.ln2_b.data(), nrm_.data(), n, c.dim, c.eps, pool_);
  L.fc1.apply(nrm_.data(), n, h1_.data(), pool_);
  gelu_tanh_inplace(h1_.data(), int64_t(n) * c.ffn_dim, pool_);
  L.fc2.apply(h1_.data(), n, att_.data(), pool_);
  scale_rows(att_.data(), L.ls2, n);
  add_inplace(x_.data(), att_.data(), nd);
}

// The patches' rows (class row dropped) in blocks of s x s: row (by, bx) holds patch
// (by * s + dy, bx * s + dx) at values ((dy * s + dx) * dim ...), as llama.cpp's reshapes place
// them.
std::vector<float> InternvlVisionEncoder::shuffle() const {
  const InternvlVisionConfig& c = m_.cfg;
  const int d = c.dim, s = c.scale, side = c.side(), rs = c.rows_side();
  std::vector<float> out(size_t(c.rows()) * c.merged_dim());
  for (int by = 0; by < rs; ++by)
    for (int bx = 0; bx < rs; ++bx) {
      float* dst = out.data() + (size_t(by) * rs + bx) * c.merged_dim();
      for (int dy = 0; dy < s; ++dy)
        for (int dx = 0; dx < s; ++dx) {
          const float* src = x_.data() + (size_t(by * s + dy) * side + bx * s + dx) * d;
          std::copy_n(src, d, dst + size_t(dy * s + dx) * d);
        }
    }
  return out;
}

Result<std::vector<float>> InternvlVisionEncoder::encode(const Image& tile) {
  const InternvlVisionConfig& c = m_.cfg;
  KAMERA_ASSIGN_OR_RETURN(const std::vector<float> patches,
                          siglip_patches(tile, c.vit(), "internvl"));
  const int n = c.n_patches() + 1, d = c.dim;
  for (auto* v : {&x_, &nrm_, &q_, &k_, &v_, &att_}) v->resize(size_t(n) * d);
  h1_.resize(size_t(n) * c.ffn_dim);
  members_.resize(size_t(n));
  for (int i = 0; i < n; ++i) members_[size_t(i)] = i;
  offsets_ = {0, n};
  embed(patches);
  for (const auto& L : m_.w.layers) {
    if (stop_ && stop_())
      return make_error(ErrorCode::InvalidArgument,
                        "internvl vision encode: stopped before its end");
    block(L);
  }
  std::vector<float> rows = shuffle();
  const int r = c.rows(), o = c.out_dim;
  layernorm(rows.data(), m_.w.mm_norm_w.data(), m_.w.mm_norm_b.data(), rows.data(), r,
            c.merged_dim(), InternvlVisionConfig::kProjectorEps, pool_);
  std::vector<float> h(size_t(r) * o), out(size_t(r) * o);
  m_.w.mm1.apply(rows.data(), r, h.data(), pool_);
  gelu_tanh_inplace(h.data(), int64_t(r) * o, pool_);
  m_.w.mm3.apply(h.data(), r, out.data(), pool_);
  return out;
}

}  // namespace kamera
