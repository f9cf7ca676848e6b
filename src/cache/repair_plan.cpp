// The repair budget's choice (cache/repair_plan.h).
#include "cache/repair_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kamera {

double deficit_estimate(const DeficitInputs& in) {
  const int mine = std::max(0, in.request_antecedents);
  const int theirs = in.stored_antecedents >= 0 ? in.stored_antecedents : in.shared;
  const int shared = std::clamp(in.shared, 0, std::min(mine, theirs));
  const int differ = (mine - shared) + (theirs - shared);
  const int all = mine + theirs;
  // A quarter of one differing antecedent: below any changed context, above the exact one.
  const double floor = 0.25 / double(all + 1);
  if (differ == 0) return floor;
  return std::max(floor, double(differ) / double(all));
}

double deficit_estimate(const SegmentIndex::Hit& h, size_t request_antecedents) {
  return deficit_estimate(
      DeficitInputs{int(request_antecedents), h.antecedents, h.shared, h.rows != nullptr});
}

std::vector<size_t> choose_repairs(std::span<const RepairCandidate> c, double budget) {
  std::vector<size_t> order(c.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (c[a].estimate != c[b].estimate) return c[a].estimate > c[b].estimate;
    return c[a].segment > c[b].segment;  // nearer the query first
  });
  int64_t total = 0;
  for (const RepairCandidate& r : c) total += r.tokens;
  // The tokens the budget pays for (a hair of slack so that 1.0 covers them all exactly).
  int64_t left = int64_t(std::floor(std::clamp(budget, 0.0, 1.0) * double(total) + 1e-9));
  std::vector<size_t> chosen;
  for (size_t k : order) {
    if (c[k].estimate <= 0 || c[k].tokens > left) continue;
    chosen.push_back(k);
    left -= c[k].tokens;
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

}  // namespace kamera
