// Scores of arms against the re-prefill reference (docs/METHOD.md), shared by every
// harness: the reuse bench and the evaluation suite, the window bench and the mini-VL evaluation.
// A measurement is one query answered once per arm (an item's query, a clip's question, a window
// operation's query); each arm's record holds its KL to the reference and its last-position argmax
// per measurement, its serve cost per item, and the error of the KV rows it served.
#pragma once

#include <cmath>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "reuse/chunk_kv.h"

namespace kamera {

struct ArmKey {
  std::string name;
  int rank = 0;       // 0: not a patch arm; kFullRank: "full"
  std::string param;  // the arm's knob, e.g. "p=0.15", "k=8", "l=3"
  bool operator==(const ArmKey&) const = default;
};

// What an arm spent at serve time beyond blind reuse (placing the canonicals).
struct ArmCost {
  double recompute_fraction = 0;  // (token, layer) pairs recomputed / (reused tokens x layers)
  double bytes_fraction = 0;      // extra KV bytes / the reused chunks' canonical bytes
  double kv_bytes = 0;            // extra KV bytes read from the store or written to the pool
  double flops = 0;               // forward FLOPs (recompute) or patch GEMM FLOPs
  ArmCost& operator+=(const ArmCost& o);
};

// The worst error of served KV rows against the conditioned rows re-prefill writes.
struct KvError {
  double max_abs = -1, max_rel = -1;  // -1: nothing served from the store
  int64_t max_ulp = -1;
  void add(const ChunkKV& served, const ChunkKV& conditioned);
};

struct ArmRecord {
  ArmKey key;
  std::vector<int> measurement;  // measurement index of each score
  std::vector<double> kl;        // KL(reference || arm), mean over the query's scored rows
  std::vector<int32_t> last_argmax;
  std::vector<double> ms;  // optional timings
  ArmCost cost;            // summed over the items it ran on
  int cost_items = 0;
  KvError kv_error;
  void add_cost(const ArmCost& c) {
    cost += c;
    ++cost_items;
  }
};

struct MeasurementInfo {
  int item = 0;
  int32_t ref_argmax = 0;  // the reference's argmax at the query's last position
  int family = 0;          // a harness-defined tag (question family, scenario group)
  int32_t gold = -1;       // the right answer when known
};

class Scoreboard {
 public:
  int add_measurement(const MeasurementInfo& m);
  const std::vector<MeasurementInfo>& measurements() const { return measurements_; }
  std::vector<int> of_item(int item) const;  // the item's measurements, in order
  // The record of `key`, created (in first-use order) when absent.
  ArmRecord& arm(const ArmKey& key);
  const ArmRecord* find(const ArmKey& key) const;
  const std::deque<ArmRecord>& arms() const { return arms_; }
  // Scores `logits` (rows x n_vocab) against the reference's rows of measurement m.
  void score(ArmRecord& a, int m, std::span<const float> ref, std::span<const float> logits,
             int n_vocab);

 private:
  std::vector<MeasurementInfo> measurements_;
  std::deque<ArmRecord> arms_;  // a deque: references stay valid as arms are added
};

// An arm's measurements summed up against a base arm (blind reuse unless said otherwise) on the
// same measurements.
struct ArmStats {
  int n = 0, flips = 0;
  double kl = 0, kl_median = 0;
  double eta = NAN, eta_median = NAN;  // NAN: undefined (the base's KL is 0, or no base)
  double flip_recover = NAN;           // NAN: no flips (or no blind arm)
  double argmax_agree = 0;
  double accuracy = NAN;  // share of measurements whose argmax is the gold answer
};

using MeasurementFilter = std::function<bool(const MeasurementInfo&)>;

// eta against eta_base, flips and flip-recover against blind (either may be null), restricted to
// the measurements `keep` accepts (all when empty).
ArmStats summarize(const Scoreboard& board, const ArmRecord& arm, const ArmRecord* eta_base,
                   const ArmRecord* blind, const MeasurementFilter& keep = {});

}  // namespace kamera
