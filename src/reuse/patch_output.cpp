#include "reuse/patch_output.h"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>

namespace kamera {

namespace {

// r_i + lambda mean(r), or all ones when row_w is empty.
std::vector<double> regularised_rows(std::span<const double> row_w, int rows, double lambda) {
  std::vector<double> r(size_t(rows), 1.0);
  if (row_w.empty()) return r;
  double mean = 0;
  for (double w : row_w) mean += w;
  mean /= rows;
  if (!(mean > 0)) return r;  // no mass anywhere: unweighted
  for (int i = 0; i < rows; ++i) r[size_t(i)] = std::max(row_w[size_t(i)], 0.0) + lambda * mean;
  return r;
}

// C^{1/2} and C^{-1/2} (cols x cols, row-major) of C = gram + lambda tr(gram)/cols I; identity
// when gram is empty.
Status gram_roots(std::span<const double> gram, int cols, double lambda, std::vector<double>& half,
                  std::vector<double>& inv_half) {
  const size_t cc = size_t(cols) * cols;
  half.assign(cc, 0.0);
  inv_half.assign(cc, 0.0);
  double tr = 0;
  for (int j = 0; j < cols && !gram.empty(); ++j) tr += gram[size_t(j) * cols + j];
  if (gram.empty() || !(tr > 0)) {
    for (int j = 0; j < cols; ++j) half[size_t(j) * cols + j] = inv_half[size_t(j) * cols + j] = 1;
    return Status::Ok();
  }
  std::vector<double> q(gram.begin(), gram.end()), w(static_cast<size_t>(cols));
  for (int j = 0; j < cols; ++j) q[size_t(j) * cols + j] += lambda * tr / cols;
  if (LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', cols, q.data(), cols, w.data()) != 0)
    return make_error(ErrorCode::Internal, "eigendecomposition (dsyevd) of a {} x {} Gram failed",
                      cols, cols);
  const double floor = lambda * tr / cols;  // eigenvalues are >= that up to rounding
  // half = Q diag(sqrt(w)) Q^T, inv_half = Q diag(1/sqrt(w)) Q^T
  std::vector<double> qs(q.size()), qi(q.size());
  for (int a = 0; a < cols; ++a)
    for (int c = 0; c < cols; ++c) {
      const double e = std::sqrt(std::max(w[size_t(c)], floor));
      qs[size_t(a) * cols + c] = q[size_t(a) * cols + c] * e;
      qi[size_t(a) * cols + c] = q[size_t(a) * cols + c] / e;
    }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cols, cols, cols, 1.0, qs.data(), cols,
              q.data(), cols, 0.0, half.data(), cols);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cols, cols, cols, 1.0, qi.data(), cols,
              q.data(), cols, 0.0, inv_half.data(), cols);
  return Status::Ok();
}

}  // namespace

Status weighted_truncated_svd(const float* a, int rows, int cols, int m,
                              std::span<const double> row_w, std::span<const double> gram,
                              double lambda, std::vector<float>& us, std::vector<float>& vt) {
  const int k = std::min(rows, cols);
  if (m == kFullRank) m = k;
  if (m < 1 || m > k)
    return make_error(ErrorCode::InvalidArgument,
                      "rank {} is outside [1, {}] for a {} x {} deficit", m, k, rows, cols);
  if (!row_w.empty() && int(row_w.size()) != rows)
    return make_error(ErrorCode::InvalidArgument, "{} row weights for a {}-row deficit",
                      row_w.size(), rows);
  if (!gram.empty() && gram.size() != size_t(cols) * cols)
    return make_error(ErrorCode::InvalidArgument, "column Gram of {} values for {} columns",
                      gram.size(), cols);
  const std::vector<double> r = regularised_rows(row_w, rows, lambda);
  std::vector<double> half, inv_half;
  KAMERA_TRY(gram_roots(gram, cols, lambda, half, inv_half));
  // X = diag(r)^{1/2} A C^{1/2}   (rows x cols)
  std::vector<double> ad(size_t(rows) * cols), x(size_t(rows) * cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      ad[size_t(i) * cols + j] = std::sqrt(r[size_t(i)]) * a[size_t(i) * cols + j];
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, cols, cols, 1.0, ad.data(), cols,
              half.data(), cols, 0.0, x.data(), cols);
  std::vector<double> u(size_t(rows) * k), s(static_cast<size_t>(k)), v(size_t(k) * cols);
  if (LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', rows, cols, x.data(), cols, s.data(), u.data(), k,
                     v.data(), cols) != 0)
    return make_error(ErrorCode::Internal, "SVD (dgesdd) of the weighted deficit failed");
  // us = diag(r)^{-1/2} U_m S_m;  vt = V_m^T C^{-1/2}
  us.resize(size_t(rows) * m);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < m; ++j)
      us[size_t(i) * m + j] = float(u[size_t(i) * k + j] * s[size_t(j)] / std::sqrt(r[size_t(i)]));
  std::vector<double> vd(size_t(m) * cols);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, cols, cols, 1.0, v.data(), cols,
              inv_half.data(), cols, 0.0, vd.data(), cols);
  vt.assign(vd.begin(), vd.end());
  return Status::Ok();
}

double weighted_error(const float* e, int rows, int cols, std::span<const double> row_w,
                      std::span<const double> gram, double lambda) {
  const std::vector<double> r = regularised_rows(row_w, rows, lambda);
  std::vector<double> half, inv_half;
  if (!gram_roots(gram, cols, lambda, half, inv_half).ok()) return NAN;
  double total = 0;
  std::vector<double> y(static_cast<size_t>(cols));
  for (int i = 0; i < rows; ++i) {
    // ||e_i C^{1/2}||^2 = e_i C e_i^T
    for (int b = 0; b < cols; ++b) {
      double acc = 0;
      for (int a2 = 0; a2 < cols; ++a2)
        acc += double(e[size_t(i) * cols + a2]) * half[size_t(a2) * cols + b];
      y[size_t(b)] = acc;
    }
    double n2 = 0;
    for (double t : y) n2 += t * t;
    total += r[size_t(i)] * n2;
  }
  return total;
}

namespace {

// The deficit target - base of one (layer, channel): n x width, f32.
std::vector<float> deficit(const ChunkKV& target, const ChunkKV& base, int layer, int ch) {
  const int n = target.n_tokens, width = target.layout.channels[size_t(ch)].width;
  std::vector<float> d(size_t(n) * width), rb(static_cast<size_t>(width));
  for (int i = 0; i < n; ++i) {
    target.at(layer, ch).get_row(i, &d[size_t(i) * width]);
    base.at(layer, ch).get_row(i, rb.data());
    for (int j = 0; j < width; ++j) d[size_t(i) * width + j] -= rb[size_t(j)];
  }
  return d;
}

// Columns [c0, c0 + cols) of a width x width Gram (a diagonal block); empty stays empty.
std::vector<double> gram_block(const std::vector<double>& g, int width, int c0, int cols) {
  if (g.empty()) return {};
  std::vector<double> b(size_t(cols) * cols);
  for (int a = 0; a < cols; ++a)
    for (int c = 0; c < cols; ++c) b[size_t(a) * cols + c] = g[size_t(c0 + a) * width + c0 + c];
  return b;
}

}  // namespace

Result<Patch> form_output_patch(const ChunkKV& target, const ChunkKV& base,
                                const PatchOptions& opts, const OutputWeights& weights) {
  if (target.n_tokens != base.n_tokens || target.layout.n_layers != base.layout.n_layers ||
      target.layout.channels.size() != base.layout.channels.size())
    return make_error(ErrorCode::InvalidArgument,
                      "form_output_patch: conditioned KV ({} tokens) and canonical ({} tokens) "
                      "differ in shape",
                      target.n_tokens, base.n_tokens);
  const int n_ch = int(target.layout.channels.size());
  if (weights.n_layers != target.layout.n_layers || weights.n_channels != n_ch)
    return make_error(ErrorCode::InvalidArgument,
                      "form_output_patch: weights for {} layers x {} channels, KV has {} x {}",
                      weights.n_layers, weights.n_channels, target.layout.n_layers, n_ch);
  if (opts.rank != kFullRank && opts.rank < 1)
    return make_error(ErrorCode::InvalidArgument, "patch rank {} must be >= 1 or full", opts.rank);
  if (opts.per_head && opts.head_dim <= 0)
    return make_error(ErrorCode::InvalidArgument, "per-head patches need the head dim");
  Patch p;
  p.n_tokens = target.n_tokens;
  p.options = opts;
  const int n = target.n_tokens;
  for (int layer : opts.layers.resolve(target.layout.n_layers))
    for (int ch = 0; ch < n_ch; ++ch) {
      const int width = target.layout.channels[size_t(ch)].width;
      const std::vector<float> delta = deficit(target, base, layer, ch);
      const ChannelWeights& w = weights.at(layer, ch);
      if (!w.rows.empty() && int(w.rows.size()) != n)
        return make_error(ErrorCode::InvalidArgument,
                          "form_output_patch: {} row weights for a {}-token chunk (layer {})",
                          w.rows.size(), n, layer);
      const int slices = opts.per_head ? width / opts.head_dim : 1;
      const int cols = width / slices;
      for (int h = 0; h < slices; ++h) {
        std::vector<float> block(size_t(n) * cols);
        for (int i = 0; i < n; ++i)
          std::copy_n(&delta[size_t(i) * width + h * cols], cols, &block[size_t(i) * cols]);
        const int k = std::min(n, cols);
        const int m = opts.rank == kFullRank ? k
                      : opts.cap_rank        ? std::min(opts.rank, k)
                                             : opts.rank;
        const std::vector<double> g = gram_block(w.gram, width, h * cols, cols);
        std::vector<float> us, vt;
        KAMERA_TRY(
            weighted_truncated_svd(block.data(), n, cols, m, w.rows, g, weights.lambda, us, vt));
        p.factors.push_back(PatchFactor::from_f32(layer, ch, h * cols, n, cols, m, us.data(),
                                                  vt.data(), opts.dtype));
      }
    }
  return p;
}

}  // namespace kamera
