// The literature's repair methods as arms of the harness (docs/METHOD.md, baselines), all on
// the same relocated canonicals of the reused chunks:
//   token recompute: cacheblend (top-p by V deviation at an early layer), epic (first k tokens of
//     each chunk), sink (first k), vlcache (a uniform share), oracle_delta_tokens (top-p by the
//     true deficit), partial_reprefill (every token from layer l up), oracle_quest (the tokens the
//     query reads most, at the bytes of a rank-m patch);
//   shadowkv_lowrank_k: a rank-r absolute K at the bytes of a rank-m patch (MHA/GQA only);
// and the pooled per-layer basis of the deficit's anatomy.
#pragma once

#include <memory>
#include <vector>

#include "eval/arm.h"
#include "eval/recompute.h"
#include "reuse/patch.h"

namespace kamera {

struct BaselineOptions {
  std::vector<double> cacheblend_share = {0.05, 0.15, 0.3, 0.5};  // recompute share p
  int cacheblend_select_layer = 1;  // the early layer whose V deviation ranks the tokens
  std::vector<int> epic_k = {4, 8, 16};
  int sink_k = 32;              // < 0: no sink arm
  double vlcache_share = 0.10;  // <= 0 with no arm wanted: see make_baseline_arms
  std::vector<double> delta_token_share = {0.1, 0.25, 0.5, 0.75};  // oracle |delta| selector
  bool partial_reprefill = true;
  std::vector<int> matched_ranks = {4, 8, 16};  // ShadowKV / Quest arms at the bytes of these ranks
};

// A recompute arm: blind reuse, then the tokens its selector picks recomputed in context.
class RecomputeArm : public Arm {
 public:
  using Arm::Arm;
  Result<bool> prepare(const PreparedItem& it) override;
  Result<ArmBuild> build(const PreparedItem& it, SeqId seq) override;

 protected:
  // The tokens to recompute, as indices into the reused chunks' tokens (concatenated), ascending;
  // from_layer, select_layer, keep and hidden as RecomputePlan. false: the arm does not apply.
  virtual Result<bool> select(const PreparedItem& it, RecomputePlan& plan) = 0;
  std::vector<float> hidden_;  // rows entering from_layer when the arm supplies them

 private:
  RecomputePlan plan_;
  std::vector<float> rows_;  // embedding rows of the selected tokens (embedding chunks)
  std::vector<int32_t> ids_;
};

// Every arm of `o`, in the order the reports list them.
std::vector<std::unique_ptr<Arm>> make_baseline_arms(const Model& model, const BaselineOptions& o);

// A fixed per-layer basis: the top-m right singular vectors of the deficits of `train`, one per
// (layer, channel); `error_ratio` accumulates ||delta - projection|| against each item's own
// rank-m SVD.
class PooledBasisArm : public Arm {
 public:
  PooledBasisArm(int rank, const std::vector<const ChunkKV*>& train_deltas, const KvLayout& layout);
  Result<bool> prepare(const PreparedItem& it) override;
  Result<ArmBuild> build(const PreparedItem& it, SeqId seq) override;
  Status status() const { return status_; }
  double error_ratio() const;

 private:
  int rank_;
  KvLayout layout_;
  std::vector<std::vector<float>> basis_;  // per (layer, channel): k x width
  std::vector<int> basis_rank_;
  std::vector<Patch> patches_;
  double err_pooled_ = 0, err_own_ = 0;
  Status status_;
};

// The deficit KV(B | A) - C_B of a reused chunk (f32).
ChunkKV deficit(const ReusedChunk& r);

}  // namespace kamera
