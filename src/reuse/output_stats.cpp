#include "reuse/output_stats.h"

#include <cblas.h>

#include <algorithm>

#include "kv/pool.h"
#include "ops/rope.h"

namespace kamera {

OutputStats::OutputStats(const ModelConfig& cfg, int first_token)
    : cfg_(cfg),
      first_token_(first_token),
      queries_(size_t(cfg.n_layers)),
      mass_(size_t(cfg.n_layers)) {}

void OutputStats::layer_queries(int layer, const float* q, int n, int width) {
  auto& rows = queries_[size_t(layer)];
  rows.insert(rows.end(), q, q + size_t(n) * width);
}

float* OutputStats::key_mass(int layer, int n_keys) {
  auto& m = mass_[size_t(layer)];
  if (int(m.size()) < n_keys) m.resize(size_t(n_keys), 0.0f);
  return m.data();
}

size_t OutputStats::floats() const {
  size_t f = 0;
  for (const auto& q : queries_) f += q.size();
  for (const auto& m : mass_) f += m.size();
  return f;
}

std::vector<double> value_gram(const Model& model, int layer) {
  const ModelConfig& c = model.cfg;
  const int d = c.dim, hd = c.head_dim, kvw = c.kv_width(), group = c.n_heads / c.n_kv_heads;
  const int ow = c.attn_out_width();
  std::vector<float> wo(size_t(d) * ow);  // d x ow
  model.layers[size_t(layer)].wo.rows_f32(0, d, wo.data());
  std::vector<double> ws(size_t(d) * kvw, 0.0);  // d x kvw: columns of a group summed
  for (int r = 0; r < d; ++r)
    for (int h = 0; h < c.n_heads; ++h)
      for (int e = 0; e < hd; ++e)
        ws[size_t(r) * kvw + (h / group) * hd + e] += wo[size_t(r) * ow + h * hd + e];
  std::vector<double> g(size_t(kvw) * kvw);
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kvw, kvw, d, 1.0, ws.data(), kvw, ws.data(),
              kvw, 0.0, g.data(), kvw);
  return g;
}

namespace {

// R(-p) S R(-p)^T of a head_dim x head_dim block: rotate every row, transpose, rotate again (S
// symmetric, so the result is too).
void rotate_moment(const RopeDesc& d, const float* cs, const float* sn, std::vector<float>& s,
                   std::vector<float>& tmp) {
  const int hd = d.head_dim;
  for (int r = 0; r < hd; ++r) rope_apply(d, cs, sn, &s[size_t(r) * hd], 1, /*inverse=*/true);
  for (int a = 0; a < hd; ++a)
    for (int b = 0; b < hd; ++b) tmp[size_t(b) * hd + a] = s[size_t(a) * hd + b];
  for (int r = 0; r < hd; ++r) rope_apply(d, cs, sn, &tmp[size_t(r) * hd], 1, /*inverse=*/true);
  s.swap(tmp);
}

}  // namespace

Result<OutputWeights> OutputStats::weights(const Model& model, const RopeCache& rope, int first,
                                           int n, std::span<const Pos> positions,
                                           const RopeCache* local_rope) const {
  const ModelConfig& c = cfg_;
  if (c.attention != AttentionKind::Gqa)
    return make_error(ErrorCode::Unsupported, "output-aware patches need MHA/GQA layers");
  if (c.layer_kinds.any(LayerKind::Local) && !local_rope)
    return make_error(ErrorCode::InvalidArgument,
                      "output weights: the model's local layers need their rope");
  if (int(positions.size()) != n || first < first_token_)
    return make_error(ErrorCode::InvalidArgument,
                      "output weights: chunk at tokens [{}, {}) with {} positions, stats from {}",
                      first, first + n, positions.size(), first_token_);
  const int hd = c.head_dim, qw = c.q_width(), kvw = c.kv_width(), group = c.n_heads / c.n_kv_heads;
  const int half = rope.desc().n_pairs();
  OutputWeights w;
  w.n_layers = c.n_layers;
  w.n_channels = 2;
  w.blocks.resize(size_t(c.n_layers) * 2);
  std::vector<float> cs(size_t(std::max(half, 1))), sn(cs.size()), s, tmp(size_t(hd) * hd);
  for (int l = 0; l < c.n_layers; ++l) {
    const auto& q = queries_[size_t(l)];
    const int rows = int(q.size() / size_t(qw)), from = first - first_token_;
    if (from + n > rows || int(mass_[size_t(l)].size()) < first + n)
      return make_error(ErrorCode::InvalidArgument,
                        "output weights: layer {} saw {} query rows, the chunk needs {}", l, rows,
                        from + n);
    // S_g = sum over the chunk's and later query rows of its query heads' q q^T (hd x hd)
    std::vector<float> sg(size_t(c.n_kv_heads) * hd * hd, 0.0f);
    for (int h = 0; h < c.n_heads; ++h)
      cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, hd, rows - from, 1.0f,
                  q.data() + size_t(from) * qw + size_t(h) * hd, qw, 1.0f,
                  sg.data() + size_t(h / group) * hd * hd, hd);
    for (int g = 0; g < c.n_kv_heads; ++g)  // syrk filled the upper triangle
      for (int a = 0; a < hd; ++a)
        for (int b = 0; b < a; ++b)
          sg[size_t(g) * hd * hd + size_t(a) * hd + b] =
              sg[size_t(g) * hd * hd + size_t(b) * hd + a];
    // K: block-diagonal, block g = mean over the chunk's rows j of R(-p_j) S_g R(-p_j)^T
    std::vector<double> kg(size_t(kvw) * kvw, 0.0);
    const LayerKind kind = c.layer_kinds.at(l);  // NoRope: nothing rotated; Local: its own rope
    const RopeCache& lr = kind == LayerKind::Local ? *local_rope : rope;
    const bool rotated = half > 0 && kind != LayerKind::NoRope;
    for (int j = 0; j < n; ++j) {
      if (rotated) lr.angles(positions[size_t(j)], cs.data(), sn.data());
      for (int g = 0; g < c.n_kv_heads; ++g) {
        s.assign(sg.begin() + size_t(g) * hd * hd, sg.begin() + size_t(g + 1) * hd * hd);
        if (rotated) rotate_moment(lr.desc(), cs.data(), sn.data(), s, tmp);
        for (int a = 0; a < hd; ++a)
          for (int b = 0; b < hd; ++b)
            kg[size_t(g * hd + a) * kvw + g * hd + b] += double(s[size_t(a) * hd + b]) / n;
      }
    }
    w.blocks[size_t(l) * 2 + channel::kGqaKey].gram = std::move(kg);
    // V: rows weighted by the mass each received, columns by the group-summed W_o's Gram
    ChannelWeights& v = w.blocks[size_t(l) * 2 + channel::kGqaValue];
    v.rows.assign(mass_[size_t(l)].begin() + first, mass_[size_t(l)].begin() + first + n);
    v.gram = value_gram(model, l);
  }
  return w;
}

}  // namespace kamera
