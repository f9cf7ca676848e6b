// The estimate bench's tables: correlation of each estimator with KL, the skip decisions at
// quantile thresholds, the arms' totals, and the JSON of it all.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "bench/estimate_bench.h"
#include "eval/correlation.h"
#include "eval/metrics.h"

namespace kamera {

namespace {

std::vector<std::string> arms_of(const std::vector<EstimateCase>& cases) {
  std::vector<std::string> arms;
  for (const auto& c : cases)
    if (std::find(arms.begin(), arms.end(), c.arm) == arms.end()) arms.push_back(c.arm);
  return arms;
}

// Skip the cases whose estimate is below the `share` quantile of the estimates (ties broken by
// order of appearance, lower first, so exactly round(share · n) cases are skipped).
SkipPoint skip_at(const std::vector<double>& est, const std::vector<double>& kl, double share,
                  double kl_threshold) {
  SkipPoint p;
  p.share = share;
  std::vector<size_t> order(est.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return est[a] < est[b]; });
  const size_t k = std::min(order.size(), size_t(std::lround(share * double(order.size()))));
  p.threshold = k < order.size() ? est[order[k]] : (order.empty() ? 0 : est[order.back()]);
  size_t bad = 0;
  for (size_t i = 0; i < k; ++i) bad += kl[order[i]] > kl_threshold;
  p.skipped = order.empty() ? 0 : double(k) / double(order.size());
  p.false_skip = k ? double(bad) / double(k) : NAN;
  return p;
}

}  // namespace

namespace {

// The rows of one arm over the cases of one composition ("all": every case).
void summarize_arm(const std::vector<EstimateCase>& cases, const std::string& arm,
                   const std::string& composition, const EstimateOptions& o,
                   std::vector<EstimatorRow>& rows) {
  const auto& names = estimator_names();
  std::vector<double> kl;
  std::vector<std::vector<double>> est(names.size());
  for (const auto& c : cases) {
    if (c.arm != arm || (composition != "all" && c.composition != composition)) continue;
    kl.push_back(c.kl);
    for (size_t e = 0; e < names.size() && e < c.estimates.size(); ++e)
      est[e].push_back(c.estimates[e]);
  }
  for (size_t e = 0; e < names.size(); ++e) {
    if (est[e].size() != kl.size() || kl.empty()) continue;
    EstimatorRow r;
    r.arm = arm;
    r.composition = composition;
    r.estimator = names[e];
    r.n = int(kl.size());
    r.spearman = spearman(est[e], kl);
    r.pearson = pearson(est[e], kl);
    for (double s : o.skip_shares) r.skips.push_back(skip_at(est[e], kl, s, o.kl_threshold));
    rows.push_back(std::move(r));
  }
}

}  // namespace

std::vector<EstimatorRow> summarize_estimates(const std::vector<EstimateCase>& cases,
                                              const EstimateOptions& o) {
  std::vector<EstimatorRow> rows;
  for (const std::string& arm : arms_of(cases)) {
    if (arm == "blind") continue;  // the η base: nothing is served from a context to estimate
    summarize_arm(cases, arm, "all", o, rows);
    for (const std::string& comp : o.compositions) summarize_arm(cases, arm, comp, o, rows);
  }
  return rows;
}

std::vector<ArmTotals> arm_totals(const std::vector<EstimateCase>& cases,
                                  const EstimateOptions& o) {
  std::vector<ArmTotals> out;
  std::vector<double> blind;
  for (const auto& c : cases)
    if (c.arm == "blind") blind.push_back(c.kl);
  for (const std::string& arm : arms_of(cases)) {
    std::vector<double> kl;
    for (const auto& c : cases)
      if (c.arm == arm) kl.push_back(c.kl);
    ArmTotals t;
    t.arm = arm;
    t.n = int(kl.size());
    t.kl_mean = mean(kl);
    t.kl_median = median(kl);
    t.above =
        double(std::count_if(kl.begin(), kl.end(), [&](double x) { return x > o.kl_threshold; })) /
        double(std::max<size_t>(1, kl.size()));
    if (blind.size() == kl.size()) t.eta = eta(kl, blind).value_or(NAN);
    out.push_back(t);
  }
  return out;
}

nlohmann::json estimate_bench_json(const EstimateResult& r, const EstimateOptions& o) {
  using nlohmann::json;
  auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
  json rows = json::array();
  for (const auto& e : r.rows) {
    json skips = json::array();
    for (const auto& s : e.skips)
      skips.push_back({{"share", s.share},
                       {"threshold", s.threshold},
                       {"skipped", s.skipped},
                       {"false_skip", num(s.false_skip)}});
    rows.push_back({{"arm", e.arm},
                    {"composition", e.composition},
                    {"estimator", e.estimator},
                    {"n", e.n},
                    {"spearman", num(e.spearman)},
                    {"pearson", num(e.pearson)},
                    {"skips", skips}});
  }
  json arms = json::array();
  for (const auto& a : r.arms)
    arms.push_back({{"arm", a.arm},
                    {"n", a.n},
                    {"kl_mean", a.kl_mean},
                    {"kl_median", a.kl_median},
                    {"above_threshold", a.above},
                    {"eta", num(a.eta)}});
  json cases = json::array();
  for (const auto& c : r.cases)
    cases.push_back({{"group", c.group},
                     {"composition", c.composition},
                     {"arm", c.arm},
                     {"kl", c.kl},
                     {"estimates", c.estimates}});
  return json{{"kind", "kamera-estimate-bench"},
              {"rank", o.rank},
              {"kl_threshold", o.kl_threshold},
              {"compositions", o.compositions},
              {"estimators", estimator_names()},
              {"arms", arms},
              {"estimators_vs_kl", rows},
              {"cases", cases},
              {"notes", r.notes}};
}

}  // namespace kamera
