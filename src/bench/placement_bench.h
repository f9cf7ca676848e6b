// Reuse-aware placement (paper App. E; docs/RESULTS.md, "Reuse-aware placement"): when what a
// window shows is a *set* of chunks, their order is a scheduling variable. A chunk's stored patch
// is keyed by the ordered chunks in front of it, so an order that repeats a prefix already served
// finds its patches in the store (zero forwards) while a new order forms them (one forward over
// [anchor · antecedents · chunk] each). This bench replays synthetic agent traces under placement
// policies and measures, per question: patch-forming forwards and tokens, patch hit rate, stored
// patch bytes, time to first token, and the fidelity of the answer (KL to a re-prefill of the same
// order, and to a re-prefill of the order the trace asked for, which is what reordering costs when
// order carries meaning).
//
// Traces (each step: the set of chunk indices to show, in the order the agent gives them):
//   reread  - the same k chunks reread in a fresh random order each step; now and then one is
//             swapped for another of the pool (a document set the agent keeps consulting);
//   rerank  - retrieval: top-k of a pool by scores that drift each step, most relevant first;
//   revisit - a screenshot stream: the k-1 newest chunks in arrival order, and often an older one
//             looked back at, placed where it arrived (at the front).
// Policies:
//   arrival - the trace's order;
//   lru     - recency: chunks still shown keep their relative order, new ones go to the back (a
//             sliding window's order);
//   online  - reuse-aware, knowing the past only: slot by slot, a chunk whose patch behind the
//             prefix built so far was served before, else the most frequently shown so far;
//   offline - the same greedy rule with frequencies counted over the whole (known) trace;
//   orbit   - no reordering: the trace's order, each chunk served with the orbit patch of the
//             *set* in front of it (paper §4: the mean deficit over orderings of the set), so any
//             order of a set seen before hits; forming one averages up to orbit_orderings
//             forwards, counted as that many forms.
// Patch plans (which chunks get a patch, at what rank), crossed with every policy but orbit:
//   fixed    - every chunk behind another gets a patch of the fixed rank;
//   adaptive - learned per chunk from the patches formed for it so far: a chunk whose patches
//              carried less than plan_blind of its canonical's energy (median, ||patch||^2 /
//              ||canonical||^2) is served blind, with no lookup and no forward; otherwise its
//              patches after the first are formed at the smallest rank that held plan_energy of
//              the first one's energy. The first time a chunk is seen it gets the fixed plan.
// The patch store is shared by the steps of one (trace, policy, plan) run and starts empty; with
// --patch-budget its least recently used patches are dropped past the budget.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/reuse_bench.h"

namespace kamera {

struct PlacementOptions {
  std::vector<std::string> traces = {"reread", "rerank", "revisit"};
  std::vector<std::string> policies = {"arrival", "lru", "online", "offline", "orbit"};
  int orbit_orderings = 6;  // orderings an orbit patch averages (all when fewer exist)
  int steps = 24;           // questions per trace
  int set_size = 4;         // chunks shown per question (k)
  int pool_chunks = 10;     // distinct chunks a trace draws from
  int rank = 8;             // patch rank of every policy (kFullRank for full)
  std::vector<std::string> plans = {"fixed"};
  double plan_blind = 0.01;  // adaptive: blind below this relative patch energy
  double plan_energy = 0.9;  // adaptive: energy share the planned rank keeps
  size_t patch_budget = 0;   // bytes of patches the store keeps (0: no cap)
  uint64_t seed = 1;
  std::function<void(const std::string& trace, const std::string& policy, int done, int total)>
      progress;
};

// One (trace, policy) run, means over its questions.
struct PlacementRow {
  std::string trace, policy, plan;
  int questions = 0;
  double blind_share = 0;               // chunks behind another served blind by the plan
  double mean_rank = 0;                 // rank of the patches served (mean over patched chunks)
  double forms_per_question = 0;        // patches formed (one forward each)
  double form_tokens_per_question = 0;  // tokens those forwards ran
  double hit_rate = 0;       // patched chunks served from a stored patch / all patched chunks
  double patch_bytes = 0;    // patch bytes held by the store after the last question
  double ttft_ms = 0;        // assemble (forming what is missing) + the query's forward
  double reprefill_ms = 0;   // re-prefill of the served order + the query's forward
  double kl_same = 0;        // KL(re-prefill of the served order || served), nats
  double kl_blind = 0;       // KL(re-prefill of the served order || canonicals only)
  double kl_arrival = 0;     // KL(re-prefill of the trace's order || served)
  double agree_same = 0;     // argmax equal to the same-order re-prefill's
  double agree_arrival = 0;  // argmax equal to the trace-order re-prefill's
  double reordered = 0;      // share of questions served in another order than the trace's
};

struct PlacementResult {
  std::vector<PlacementRow> rows;
  std::vector<std::string> notes;
};

// The KV pool capacity (tokens) the bench needs for this model.
int64_t placement_bench_kv_tokens(const Model& model);

// Chunks come from the items' antecedents and chunks, queries from their queries (cycled).
Result<PlacementResult> run_placement_bench(Context& ctx, const std::vector<ReuseItem>& items,
                                            const PlacementOptions& opts);

nlohmann::json placement_bench_json(const PlacementResult& r);

}  // namespace kamera
