// The reuse harness of the measurement protocol (docs/METHOD.md): for each item
// {antecedent A, chunk B, query Q} every arm starts from the same exact prefix [BOS · A] and the
// same relocated canonical of B, and is scored by next-token KL to the re-prefill at every query
// position.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "context/context.h"

namespace kamera {

struct ReuseItem {
  std::string name;
  ChunkContent antecedent, chunk, query;
};

// JSONL: one {"antecedent": A, "chunk": B, "query": Q} per line; each a string (tokenized
// without BOS and without a dummy space prefix) or an array of token ids. Errors name the line.
Result<std::vector<ReuseItem>> load_reuse_items(const std::string& path, const Model& model);

// The first `cap` tokens of a token chunk (the chunk itself when it is no longer).
ChunkContent truncated(const ChunkContent& c, int cap);

// The items with picture chunks as B (the paper's Table 7 on a vision family): item i's chunk
// becomes pictures[i % n] (a tower's placed chunk), with the tower's delimiters where a prompt
// writes them (open: the end of A; close: the start of Q), so A and Q stay text.
std::vector<ReuseItem> picture_items(std::vector<ReuseItem> items,
                                     const std::vector<ChunkContent>& pictures,
                                     const std::vector<int32_t>& open,
                                     const std::vector<int32_t>& close);

struct ReuseBenchOptions {
  std::vector<int> ranks = {1, 2, 4, 8, 16, 32, kFullRank};
  bool deep_half = true;  // also a patch_deep_half arm at every rank
  DType patch_dtype = DType::F32;
  bool per_head = false;
  bool output_patches = false;  // also "patch_output" arms at every rank (reuse/patch_output.h)
  LayerSet layers;              // layers the `patch` arms cover (deep-half arms: deepest half)
  SvdMethod svd = SvdMethod::Auto;
  int timing_rank = 32;  // the rank whose serve and compile times are reported
  std::function<void(int done, int total)> progress;

  // The literature's repair methods as arms (docs/METHOD.md, baselines), all on the same
  // relocated canonical of B:
  bool baselines = false;
  std::vector<double> cacheblend_share = {0.05, 0.15, 0.3, 0.5};  // recompute share p
  int cacheblend_select_layer = 1;  // the early layer whose V deviation ranks the tokens
  std::vector<int> epic_k = {4, 8, 16};
  int sink_k = 32;
  double vlcache_share = 0.10;
  std::vector<double> delta_token_share = {0.1, 0.25, 0.5, 0.75};  // oracle |delta| selector
  std::vector<int> matched_ranks = {4, 8, 16};  // ShadowKV / Quest arms at the bytes of these ranks
  // The deficit's anatomy (head diffuseness, single-layer injection, pooled basis).
  bool anatomy = false;
  int pooled_rank = 8;
};

struct ArmSummary {
  std::string name;
  int rank = 0;  // 0: not a patch arm; kFullRank: "full"
  double kl = 0, kl_median = 0;
  double eta = NAN, eta_median = NAN;  // NAN: undefined (blind KL is 0)
  double flip_recover = NAN;           // NAN: no flips
  double argmax_agree = 0;
  double patch_bytes_fraction = 0;
  std::string param;              // the arm's knob, e.g. "p=0.15", "k=8", "l=3", "bytes_of_rank=16"
  double recompute_fraction = 0;  // (token, layer) pairs recomputed / (tokens of B x layers)
  int n_items = 0;                // items scored (the pooled-basis arm uses held-out items only)
  // Serve-time cost beyond blind reuse, mean per item: KV bytes read from the store or written to
  // the pool (patch factors; recomputed rows), and FLOPs (patch GEMMs; recompute forwards).
  double extra_kv_bytes = 0, extra_flops = 0;
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
  double canonical_bytes = 0;  // mean bytes of B's canonical (f32): the unit of bytes_fraction
  double reprefill_flops = 0;  // mean FLOPs of a re-prefill of B in context (the unit of flops)
  // Anatomy (when requested)
  double head_cells_for_90 = NAN;  // share of (layer x KV head) cells holding 90% of delta energy
  double pooled_basis_error_ratio = NAN;  // held-out: ||delta - proj_pooled|| / ||delta - own SVD||
  // Partial re-prefill needed to match the patch (paper Table 8): smallest re-run share of layers
  // whose eta reaches the patch's at match_rank.
  int match_rank = 0;
  double match_patch_eta = NAN, partial_reprefill_to_match = NAN;
};

// The KV pool capacity (tokens) the harness needs for these items: a few live forks at a time.
int64_t harness_kv_tokens(const std::vector<ReuseItem>& items);

// Runs on `ctx`'s model, engine and pool (capacity at least harness_kv_tokens(items)); empties
// its store before every item.
Result<ReuseBenchResult> run_reuse_bench(Context& ctx, const std::vector<ReuseItem>& items,
                                         const ReuseBenchOptions& opts);

nlohmann::json reuse_bench_json(const ReuseBenchResult& r);

}  // namespace kamera
