// `kamera eval`: the evaluation suite on one model. Every arm of the reuse harness (patch ranks,
// the literature's baselines, the deficit's anatomy) on each split of items, plus serve-vs-
// re-prefill time by chunk length. The result is one JSON document that `kamera report` reads.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/reuse_bench.h"

namespace kamera {

struct EvalSplit {
  std::string name;    // "dev", "heldout", "random-tokens", "frames"
  std::string source;  // the items file, or the generator and its seed
  std::string role;    // "dev" (defaults were chosen on it) or "heldout" (never used for tuning)
  std::vector<ReuseItem> items;
};

struct SuiteOptions {
  bool smoke = false;           // a few items and a short sweep of every arm (CI)
  bool output_patches = false;  // also output-aware patch arms (ReuseBenchOptions)
  std::vector<int> timing_lengths = {16, 32, 64, 128, 256};
  int timing_rank = 16;
  int timing_reps = 3;
  // (stage, done, total)
  std::function<void(const std::string&, int, int)> progress;
};

// The splits for a model: data/reuse-<stem>.jsonl (dev) and data/heldout/reuse-<stem>.jsonl
// (held out) when both exist for the model's file stem, else seeded random-token items; plus
// frame items (embedding chunks with 3-D positions) for M-RoPE models.
Result<std::vector<EvalSplit>> default_splits(const Model& model, const std::string& data_dir,
                                              bool smoke);

// ReuseBenchOptions for the suite (smoke: shorter sweeps).
ReuseBenchOptions suite_reuse_options(const Model& model, bool smoke);

// The KV pool capacity (tokens) the suite needs for these splits.
int64_t suite_kv_tokens(const std::vector<EvalSplit>& splits, const SuiteOptions& opts);

Result<nlohmann::json> run_eval_suite(Context& ctx, const std::vector<EvalSplit>& splits,
                                      const SuiteOptions& opts);

}  // namespace kamera
