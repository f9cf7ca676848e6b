// The recall cascade (docs/RESULTS.md, "The recall cascade"): when a chunk is recalled into the
// agent window (or the head slides out), every slot behind the change was conditioned on another
// antecedent set than the one now in front of it, so its patch is stale. Refreshing a dependent
// costs one forward over [anchor · antecedents · chunk]; never refreshing costs fidelity. This
// bench decides per dependent with a measured staleness signal and reports the trade-off curve.
//
// Signals (per stale dependent):
//   probe - on a fork, the dependent's last `probe_tokens` tokens are forwarded again behind the
//           window as it is now (antecedents' rows and the dependent's own earlier rows as held);
//           the signal is the relative Frobenius error of the rows the window holds for those
//           tokens against the freshly computed ones, over every layer and channel. Cost: the
//           probe tokens, vs the whole prefix for a refresh.
//   share - free: the token share of the dependent's antecedent set that changed: tokens of the
//           chunks in conditioned_on or in front of it now but not both, over the tokens of the
//           union (0 when nothing in front of it changed; blind to a pure reordering).
// Trace: a window of W chunks slides over a stream of chunks; at each step the head is evicted
// and either the next stream chunk is admitted at the back (slide) or, at a share of steps, an
// evicted chunk is recalled (fresh patch) at the front or at a random place inside. Before each
// step the window is fully refreshed (the state every policy starts from), so all policies face
// the same stale set; each policy then refreshes its chosen subset on a fork and is asked the
// step's question.
// Policies: never, always, probe>t and share>t for each threshold, and random@t (per question,
// as many random dependents as probe>t refreshed: whether the probe ranks better than chance),
// and inplace / inplace-share>t: the picked dependents, front to back, re-forward only their own
// tokens behind the rows in front of them and their rows are overwritten (n tokens each instead
// of the whole prefix; exact rows, no patch; measured on a fork, the Window has no such op yet).
// Per policy: refresh forwards and forward tokens per question (probe tokens counted for probe
// policies), mean KL to a re-prefill of the window, and eta = 1 - KL / KL(never).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/reuse_bench.h"
#include "window/window.h"

namespace kamera {

struct CascadeOptions {
  int steps = 16;             // questions
  int window_chunks = 4;      // W
  int pool_chunks = 10;       // distinct chunks the stream cycles through (> W + 1)
  double recall_share = 0.5;  // share of steps that recall an evicted chunk
  int rank = 8;               // patch rank (kFullRank for full)
  int probe_tokens = 1;       // tokens the probe re-forwards per dependent
  std::vector<double> probe_thresholds = {0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05};
  std::vector<double> share_thresholds = {0.05, 0.1, 0.2, 0.4};
  uint64_t seed = 1;
  std::function<void(int done, int total)> progress;
};

struct CascadeRow {
  std::string policy;    // never, always, probe, share, random, inplace, inplace-share
  double threshold = 0;  // probe/share/random: the threshold (random: the probe's it matches)
  int questions = 0;
  double stale_per_question = 0;             // dependents that were stale
  double refreshes_per_question = 0;         // refresh forwards
  double forward_tokens_per_question = 0;    // refresh forwards' tokens + probe tokens
  double reprefill_tokens_per_question = 0;  // one forward over [anchor · window] (every row)
  double kl = 0;                             // mean KL(re-prefill || policy), nats
  double eta = 0;                            // 1 - kl / kl(never)
};

struct CascadeResult {
  std::vector<CascadeRow> rows;
  std::vector<std::string> notes;
};

// The probe signal of `slot` (see above); the window is unchanged.
Result<double> probe_staleness(Context& ctx, const Window& w, int slot, int probe_tokens);
// The free signal of `slot` (see above); 0 for a slot whose antecedents did not change.
double antecedent_change_share(ChunkStore& store, const Window& w, int slot);

// The bench over given chunks and queries (queries cycled, one per step).
Result<CascadeResult> run_cascade(Context& ctx, const std::vector<ChunkContent>& chunks,
                                  const std::vector<ChunkContent>& queries,
                                  const CascadeOptions& o);
// Chunks from the items' antecedents and chunks (truncated to fit W + 1 into the context).
Result<CascadeResult> run_cascade_bench(Context& ctx, const std::vector<ReuseItem>& items,
                                        const CascadeOptions& o);
int64_t cascade_bench_kv_tokens(const Model& model);

nlohmann::json cascade_bench_json(const CascadeResult& r);

}  // namespace kamera
