// The reuse harness of the measurement protocol (../shared/docs/METHOD.md): for each item
// {antecedent A, chunk B, query Q} every arm starts from the same exact prefix [BOS · A] and the
// same relocated canonical of B, and is scored by next-token KL to the re-prefill at every query
// position.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/forward.h"
#include "reuse/chunk_cache.h"

namespace kamera {

struct ReuseItem {
  std::string name;
  ChunkContent antecedent, chunk, query;
};

// JSONL: one {"antecedent": A, "chunk": B, "query": Q} per line; each a string (tokenized
// without BOS and without a dummy space prefix) or an array of token ids. Errors name the line.
Result<std::vector<ReuseItem>> load_reuse_items(const std::string& path, const Model& model);

struct ReuseBenchOptions {
  std::vector<int> ranks = {1, 2, 4, 8, 16, 32, kFullRank};
  bool deep_half = true;  // also a patch_deep_half arm at every rank
  DType patch_dtype = DType::F32;
  bool per_head = false;
  LayerSet layers;  // layers the `patch` arms cover (deep-half arms: deepest half)
  SvdMethod svd = SvdMethod::Auto;
  int timing_rank = 32;  // the rank whose serve and compile times are reported
  std::function<void(int done, int total)> progress;
};

struct ArmSummary {
  std::string name;
  int rank = 0;  // 0: not a patch arm; kFullRank: "full"
  double kl = 0, kl_median = 0;
  double eta = NAN, eta_median = NAN;  // NAN: undefined (blind KL is 0)
  double flip_recover = NAN;           // NAN: no flips
  double argmax_agree = 0;
  double patch_bytes_fraction = 0;
  // B's served K/V against re-prefill's (KV(B|A)), max over items, layers, tokens, channels;
  // NAN for arms that do not serve B from the store (reprefill, oracle_mask).
  double kv_max_abs_err = NAN, kv_max_rel_err = NAN;
  int64_t kv_max_ulp = -1;
  std::vector<double> item_kl;
};

struct LayerAnatomy {
  int layer = 0;
  // Per channel (KvLayout order: k, v for GQA; c_kv, k_pe for MLA):
  std::vector<double> rel_norm;  // mean over items of ||delta|| / ||KV(B|A)||
  std::vector<double> rank90;    // mean over items of the rank holding 90% of ||delta||^2
  // Mean over items of the singular values sigma_i / sigma_0 (first min over items of
  // min(n_tokens, width) values): the shape of the deficit's spectrum at this depth.
  std::vector<std::vector<double>> spectrum;
};

struct ReuseBenchResult {
  int n_items = 0;
  int n_flips = 0;
  // Canonical keys relocated to the chunk's place vs the keys of [BOS · B] prefilled there.
  int64_t relocation_max_ulp = 0;         // over all layers, tokens and rope dims (METHOD.md)
  int64_t relocation_max_ulp_layer0 = 0;  // first layer: the keys depend on the tokens only
  double relocation_max_abs_err = 0;
  double relocation_max_rel_err = 0;  // max |diff| / max |k| per layer, max over layers
  double full_rank_max_rel_err = 0;   // max over k and v
  std::vector<std::string> channels;  // channel names, KvLayout order
  std::vector<double> full_rank_max_rel_err_channel;  // per channel
  std::vector<ArmSummary> arms;
  double timing_reprefill_ms = 0, timing_reuse_blind_ms = 0, timing_reuse_patch_ms = 0,
         timing_compile_ms = 0;  // medians over items
  int timing_rank = 0;
  std::vector<LayerAnatomy> anatomy;
  double mean_chunk_tokens = 0, mean_query_tokens = 0, mean_antecedent_tokens = 0;
};

Result<ReuseBenchResult> run_reuse_bench(const Model& model, Engine& engine,
                                         const std::vector<ReuseItem>& items,
                                         const ReuseBenchOptions& opts);

nlohmann::json reuse_bench_json(const ReuseBenchResult& r);

}  // namespace kamera
