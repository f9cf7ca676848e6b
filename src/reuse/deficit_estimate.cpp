#include "reuse/deficit_estimate.h"

#include <algorithm>
#include <cmath>

namespace kamera {

double context_distance(std::span<const Antecedent> stored, std::span<const Antecedent> now,
                        double decay) {
  // An antecedent's weight: its tokens times decay^(chunks between it and the segment).
  auto weights = [decay](std::span<const Antecedent> list) {
    std::vector<double> w(list.size());
    double f = 1;
    for (size_t i = list.size(); i-- > 0; f *= decay) w[i] = double(list[i].tokens) * f;
    return w;
  };
  const std::vector<double> ws = weights(stored), wn = weights(now);
  double total = 0;
  for (double x : ws) total += x;
  for (double x : wn) total += x;
  if (total <= 0) return 0;
  // Heaviest common subsequence (matched by id, a pair weighing both sides), one row kept.
  std::vector<double> prev(now.size() + 1, 0), cur(now.size() + 1, 0);
  for (size_t i = 1; i <= stored.size(); ++i) {
    for (size_t j = 1; j <= now.size(); ++j) {
      cur[j] = std::max(prev[j], cur[j - 1]);
      if (stored[i - 1].id == now[j - 1].id)
        cur[j] = std::max(cur[j], prev[j - 1] + ws[i - 1] + wn[j - 1]);
    }
    std::swap(prev, cur);
  }
  return std::clamp(1.0 - prev[now.size()] / total, 0.0, 1.0);
}

double relative_distance(const ChunkKV& a, const ChunkKV& b, int first_layer) {
  if (a.n_tokens != b.n_tokens || a.blocks.size() != b.blocks.size() ||
      a.layout.channels.size() != b.layout.channels.size())
    return -1;
  const int n_ch = int(b.layout.channels.size());
  const int n_layers = n_ch ? int(b.blocks.size()) / n_ch : 0;
  double diff = 0, base = 0;
  std::vector<float> ra, rb;
  for (int l = std::max(0, first_layer); l < n_layers; ++l)
    for (int c = 0; c < n_ch; ++c) {
      const ChannelMatrix &ma = a.at(l, c), &mb = b.at(l, c);
      if (ma.rows() != mb.rows() || ma.cols() != mb.cols()) return -1;
      ra.resize(ma.cols());
      rb.resize(mb.cols());
      for (int r = 0; r < mb.rows(); ++r) {
        ma.get_row(r, ra.data());
        mb.get_row(r, rb.data());
        for (int k = 0; k < mb.cols(); ++k) {
          const double d = double(ra[k]) - double(rb[k]);
          diff += d * d;
          base += double(rb[k]) * double(rb[k]);
        }
      }
    }
  if (diff == 0) return 0;
  return base > 0 ? std::sqrt(diff / base) : 1.0;
}

double residual_share(std::span<const DeltaStats> stats, int rank) {
  if (rank == kFullRank) return 0;
  double left = 0, rows = 0;
  for (const DeltaStats& s : stats) {
    rows += s.conditioned_norm * s.conditioned_norm;
    for (size_t i = size_t(std::max(rank, 0)); i < s.singular_values.size(); ++i)
      left += double(s.singular_values[i]) * double(s.singular_values[i]);
  }
  return rows > 0 ? std::sqrt(left / rows) : 0;
}

std::vector<float> key_centroid(std::span<const ChunkKV* const> canonicals, int first_layer) {
  if (canonicals.empty()) return {};
  const ChunkKV& first = *canonicals[0];
  const int n_ch = int(first.layout.channels.size());
  const int n_layers = n_ch ? int(first.blocks.size()) / n_ch : 0;
  first_layer = std::clamp(first_layer, 0, n_layers);
  const int width = n_layers > 0 ? first.at(0, 0).cols() : 0;
  std::vector<double> sum(size_t(n_layers - first_layer) * width, 0);
  std::vector<float> row(width);
  double tokens = 0;
  for (const ChunkKV* kv : canonicals) {
    for (int l = first_layer; l < n_layers; ++l) {
      const ChannelMatrix& m = kv->at(l, 0);
      double* out = sum.data() + size_t(l - first_layer) * width;
      for (int r = 0; r < m.rows(); ++r) {
        m.get_row(r, row.data());
        for (int k = 0; k < width; ++k) out[k] += row[k];
      }
    }
    tokens += kv->n_tokens;
  }
  std::vector<float> c(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) c[i] = tokens > 0 ? float(sum[i] / tokens) : 0.0f;
  return c;
}

double centroid_distance(std::span<const float> a, std::span<const float> b) {
  if (a.empty() || b.empty() || a.size() != b.size()) return 0;
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  if (aa == 0 || bb == 0) return 0;
  return std::clamp(1.0 - ab / std::sqrt(aa * bb), 0.0, 2.0);
}

double estimate_row_change(std::span<const Antecedent> stored, std::span<const Antecedent> now,
                           double sensitivity, double residual) {
  return sensitivity * context_distance(stored, now, kRecommendedDecay) + residual;
}

}  // namespace kamera
