// Window operations measured against full re-prefill (paper §5, Table 1, App. B/D):
//   slide   - evict the head; survivors keep their conditioned KV and only move (keep-as-is),
//             vs a rank-r removal patch formed from a re-prefill without the evicted chunk;
//   reorder - a chunk behind a permuted antecedent set: transfer (the stored canonical-order
//             patch), exact (the ordering's own patch), orbit (one patch from the mean deficit over
//             the other orderings; the test ordering held out), blind; K = 3, 4 exhaustive, 6
//             sampled;
//   recall  - a chunk evicted from window W0 and recalled after a turnover tau of the window:
//             stale (its patch frozen at eviction) vs fresh (formed on its current earlier
//             context).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/reuse_bench.h"

namespace kamera {

struct WindowBenchOptions {
  std::vector<std::string> scenarios = {"slide", "reorder", "recall"};
  int rank = 8;  // patches of every arm (capped at min(n, width))
  std::vector<int> removal_ranks = {4, 16, kFullRank};
  std::vector<int> reorder_k = {3, 4, 6};
  int reorder_samples = 24;  // orderings sampled when K! is larger
  int window_chunks = 5;     // recall: chunks in the window before the recalled one
  int max_items = 0;         // 0: all
  uint64_t seed = 1;
  std::function<void(const std::string& scenario, int done, int total)> progress;
};

// One row of a scenario table.
struct WindowArm {
  std::string scenario, name;  // e.g. "recall", "fresh"
  std::string group;           // e.g. "tau=0.6", "K=4"
  int rank = 0;
  int n = 0;  // measurements (items x orderings)
  double kl = 0, eta = NAN, flip_recover = NAN, argmax_agree = 0;
  double ms = NAN;   // median time of the operation
  double bytes = 0;  // mean bytes of stored state it needs (patch factors)
};

struct WindowBenchResult {
  std::vector<WindowArm> arms;
  std::vector<std::string> notes;  // what was skipped and why
};

// The KV pool capacity (tokens) the window bench needs for this model.
int64_t window_bench_kv_tokens(const Model& model);

// Runs on `ctx` (pool capacity at least window_bench_kv_tokens()); empties its store between
// measurements.
Result<WindowBenchResult> run_window_bench(Context& ctx, const std::vector<ReuseItem>& items,
                                           const WindowBenchOptions& opts);

nlohmann::json window_bench_json(const WindowBenchResult& r);

}  // namespace kamera
