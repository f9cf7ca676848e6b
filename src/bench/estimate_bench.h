// Cheap Δ estimation against the true KL (issue 52 item 3; docs/RESULTS.md, "Cheap Δ estimation
// (issue 52)"). A segment B was computed behind a stored context O; a new request holds it behind
// N. The reference is a re-prefill of [anchor · N · B · Q]; the arms serve B without a forward:
//   rows   - B's rows conditioned on O, relocated (the segment index's context-nearest hit)
//   patch  - B's canonical + the rank-m patch formed behind O (a compacted occurrence)
//   blind  - B's canonical alone (the η base of the patch arm)
// and are scored by KL(p_ref ‖ p_arm) averaged over Q's positions (docs/METHOD.md).
// Compositions of N from O, as the agent traces make them:
//   slide   - O less its first antecedent
//   reorder - a permutation of O other than O
//   recall  - B behind a different set: 1..|O| antecedents of O replaced by other chunks
// Every estimator of reuse/deficit_estimate.h is computed per case from what a server holds
// (the antecedent lists, the occurrence's rows, a second occurrence of B behind another context,
// the canonical, the patch's singular values, the antecedents' canonicals), beside the oracle
// (the served rows' true relative distance to KV(B|N), which needs the conditioned forward) and
// a seeded random estimate. Reported per arm and estimator: Spearman and Pearson correlation with
// KL, and "skip repair when estimate < t" at thresholds t chosen as quantiles of the estimate:
// the share of cases skipped and the share of skipped cases whose KL exceeds the threshold.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "context/context.h"
#include "eval/reuse_bench.h"
#include "minivl/minivl.h"

namespace kamera {

// A segment seen behind a context: the stored context O, the segment B, and a query Q asked
// after it. pool: chunks that may replace antecedents (recall, the second occurrence), none of
// them B or in O.
struct EstimateGroup {
  std::vector<ChunkContent> context;
  ChunkContent segment, query;
};

struct EstimateOptions {
  std::vector<std::string> compositions = {"slide", "reorder", "recall"};
  int rank = 8;                // the patch arm's rank (capped at min(n, width))
  double kl_threshold = 1e-3;  // a skipped case above it is a false skip
  std::vector<double> skip_shares = {0.1, 0.25, 0.5};  // thresholds at these quantiles
  uint64_t seed = 1;
  std::function<void(int done, int total)> progress;
};

// One measured case: a group under a composition, served by one arm.
struct EstimateCase {
  int group = 0;
  std::string composition, arm;
  double kl = 0;
  std::vector<double> estimates;  // in the order of estimator_names()
};

struct SkipPoint {
  double share = 0;       // the quantile the threshold sits at
  double threshold = 0;   // skip when estimate < threshold (ties: the lower cases first)
  double skipped = 0;     // share of cases skipped
  double false_skip = 0;  // share of skipped cases with kl > kl_threshold (NAN: none skipped)
};

struct EstimatorRow {
  std::string arm, composition, estimator;  // composition: one of o.compositions, or "all"
  int n = 0;
  double spearman = NAN, pearson = NAN;
  std::vector<SkipPoint> skips;
};

struct ArmTotals {
  std::string arm;
  int n = 0;
  double kl_mean = 0, kl_median = 0;
  double above = 0;  // share of cases with kl > kl_threshold
  double eta = NAN;  // 1 − mean KL / mean KL(blind), same cases
};

struct EstimateResult {
  std::vector<EstimateCase> cases;
  std::vector<EstimatorRow> rows;
  std::vector<ArmTotals> arms;
  std::vector<std::string> notes;
};

// The estimators' names, in EstimateCase::estimates order.
const std::vector<std::string>& estimator_names();

// Runs every group under every composition (pool: replacement chunks). ctx's pool holds at least
// estimate_bench_kv_tokens(); its store is emptied per group.
Result<EstimateResult> run_estimate_bench(Context& ctx, const std::vector<EstimateGroup>& groups,
                                          const std::vector<ChunkContent>& pool,
                                          const EstimateOptions& o);

// The correlations and skip points of measured cases (run_estimate_bench calls it).
std::vector<EstimatorRow> summarize_estimates(const std::vector<EstimateCase>& cases,
                                              const EstimateOptions& o);
// Per arm: KL mean and median, the share above o.kl_threshold, η against blind on the same cases.
std::vector<ArmTotals> arm_totals(const std::vector<EstimateCase>& cases, const EstimateOptions& o);

// Groups from the reuse items: O = `antecedents` chunks, the last the item's antecedent and the
// others drawn from the items' chunks, B the item's chunk, Q its query; every chunk truncated so
// [anchor · O · B · Q] fits the model's context. pool: every item's antecedent and chunk,
// truncated alike.
std::vector<EstimateGroup> text_estimate_groups(const Model& m, const std::vector<ReuseItem>& items,
                                                int antecedents, uint64_t seed,
                                                std::vector<ChunkContent>& pool);
// Groups from the mini-VL's held-out clips [first_clip, first_clip + n_clips) (frames as
// segments): O = frames 0 .. antecedents − 1, B = frame `antecedents`, Q = the clip's first
// cross-frame question (else its first). pool: every clip's frames. antecedents in [2, 5].
Result<std::vector<EstimateGroup>> minivl_estimate_groups(const minivl::MiniVl& mv, int n_clips,
                                                          int first_clip, int antecedents,
                                                          std::vector<ChunkContent>& pool);

int64_t estimate_bench_kv_tokens(const Model& model);

nlohmann::json estimate_bench_json(const EstimateResult& r, const EstimateOptions& o);

}  // namespace kamera
