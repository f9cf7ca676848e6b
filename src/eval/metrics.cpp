#include "eval/metrics.h"

#include <algorithm>

namespace kamera {

double kl_from_logits(std::span<const float> p_logits, std::span<const float> q_logits) {
  const size_t n = p_logits.size();
  double pm = -INFINITY, qm = -INFINITY;
  for (size_t i = 0; i < n; ++i) {
    pm = std::max(pm, double(p_logits[i]));
    qm = std::max(qm, double(q_logits[i]));
  }
  double ps = 0, qs = 0;
  for (size_t i = 0; i < n; ++i) {
    ps += std::exp(double(p_logits[i]) - pm);
    qs += std::exp(double(q_logits[i]) - qm);
  }
  const double plz = pm + std::log(ps), qlz = qm + std::log(qs);  // log partition functions
  double kl = 0;
  for (size_t i = 0; i < n; ++i) {
    const double lp = double(p_logits[i]) - plz, lq = double(q_logits[i]) - qlz;
    kl += std::exp(lp) * (lp - lq);
  }
  return std::max(0.0, kl);  // rounding can leave a tiny negative
}

double mean_kl_rows(std::span<const float> ref, std::span<const float> arm, int n_vocab) {
  const size_t rows = ref.size() / size_t(n_vocab);
  double s = 0;
  for (size_t r = 0; r < rows; ++r)
    s += kl_from_logits(ref.subspan(r * n_vocab, n_vocab), arm.subspan(r * n_vocab, n_vocab));
  return rows ? s / double(rows) : 0.0;
}

double mean(std::span<const double> v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / double(v.size());
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::optional<double> eta(std::span<const double> arm, std::span<const double> blind) {
  const double b = mean(blind);
  if (!(b > 0)) return std::nullopt;
  return 1.0 - mean(arm) / b;
}

std::optional<double> eta_median(std::span<const double> arm, std::span<const double> blind) {
  std::vector<double> e;
  for (size_t i = 0; i < arm.size() && i < blind.size(); ++i)
    if (blind[i] > 0) e.push_back(1.0 - arm[i] / blind[i]);
  if (e.empty()) return std::nullopt;
  return median(e);
}

std::optional<double> flip_recover(std::span<const int32_t> ref, std::span<const int32_t> blind,
                                   std::span<const int32_t> arm) {
  int flips = 0, recovered = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (blind[i] == ref[i]) continue;
    ++flips;
    recovered += arm[i] == ref[i];
  }
  if (flips == 0) return std::nullopt;
  return double(recovered) / flips;
}

double argmax_agree(std::span<const int32_t> ref, std::span<const int32_t> arm) {
  int same = 0;
  for (size_t i = 0; i < ref.size(); ++i) same += ref[i] == arm[i];
  return ref.empty() ? 0.0 : double(same) / double(ref.size());
}

}  // namespace kamera
