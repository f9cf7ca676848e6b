#include "eval/correlation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kamera {

double pearson(std::span<const double> x, std::span<const double> y) {
  const size_t n = x.size();
  if (n < 2 || y.size() != n) return NAN;
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / double(n);
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / double(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx <= 0 || syy <= 0) return NAN;
  return sxy / std::sqrt(sxx * syy);
}

std::vector<double> ranks(std::span<const double> x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double mean_rank = 0.5 * double(i + j) + 1.0;
    for (size_t k = i; k <= j; ++k) r[order[k]] = mean_rank;
    i = j + 1;
  }
  return r;
}

double spearman(std::span<const double> x, std::span<const double> y) {
  if (x.size() != y.size()) return NAN;
  const std::vector<double> rx = ranks(x), ry = ranks(y);
  return pearson(rx, ry);
}

}  // namespace kamera
