// The literature's repair methods as arms of the reuse harness (../shared/docs/BASELINES.md), and
// the pooled-basis probe of the deficit's anatomy. Internal to eval/.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "eval/reuse_bench.h"

namespace kamera {

// Everything one item's arms share: the exact prefix [BOS · A] (a sequence to fork), B's
// canonical (served at pB), B's conditioned KV, the query, and the re-prefill reference logits.
struct BaselineItem {
  const Model& model;
  Engine& engine;
  KvPool& pool;
  ChunkCache& cache;
  const ReuseBenchOptions& opts;
  const ReuseItem& item;
  const CanonicalEntry& canon;
  const ChunkKV& cond;
  SeqId prefix;
  int32_t pB, pQ;
  int nA, nB;
  const std::vector<float>& ref;
};

// What an arm spent at serve time beyond blind reuse (placing B's canonical).
struct ArmCost {
  double recompute_fraction = 0;  // (token, layer) pairs recomputed / (tokens of B x layers)
  double bytes_fraction = 0;      // extra KV bytes (stored or rewritten) / B's canonical bytes
  double kv_bytes = 0;            // extra KV bytes read from the store or written to the pool
  double flops = 0;               // forward FLOPs (recompute) or patch GEMM FLOPs
};

// (arm name, rank or 0, knob, query logits, cost)
using ArmSink = std::function<void(const std::string&, int, const std::string&,
                                   const std::vector<float>&, const ArmCost&)>;

// cacheblend, epic, sink, vlcache, oracle_delta_tokens, partial_reprefill, and at the bytes of
// each matched rank: oracle_quest and (MHA/GQA only) shadowkv_lowrank_k.
Status run_baselines(const BaselineItem& b, const ArmSink& sink);

// A fixed per-layer basis (top-m right singular vectors of the deficits of the even items) used on
// the odd (held-out) items: error ratio against each item's own rank-m SVD, and served logits.
Status pooled_basis_pass(
    Context& ctx, const std::vector<ReuseItem>& items,
    const std::vector<std::vector<ChunkKV>>& deltas, int rank, double* error_ratio,
    const std::function<void(int, const std::vector<float>&, const std::vector<float>&)>& sink);

}  // namespace kamera
