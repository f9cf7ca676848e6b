// In-context recompute of chosen tokens already in a sequence: the primitive of the
// token-selection baselines (CacheBlend, EPIC, VLCache, attention sink, partial re-prefill, the
// oracle selectors; docs/METHOD.md, baselines), written on the engine's layer steps. From layer
// `from_layer` up, the chosen tokens' cached rows are recomputed from their hidden states and
// overwrite the pool rows, and their queries attend to the sequence as it stands (reused rows of
// the others, recomputed rows of the chosen).
#pragma once

#include <span>
#include <vector>

#include "model/forward.h"

namespace kamera {

struct RecomputePlan {
  std::vector<int> tokens;  // sequence indices, ascending
  int from_layer = 0;
  const float* hidden = nullptr;  // rows entering from_layer (tokens x dim), or null: embeddings
  std::span<const int32_t> ids;   // token ids when hidden is null (from_layer 0)
  // CacheBlend's gradual filtering: at select_layer keep only the `keep` tokens whose recomputed
  // content channel (V; MLA: the latent) deviates most (mean squared) from the reused one; the
  // others stop there.
  int select_layer = -1;
  int keep = 0;
};

struct RecomputeStats {
  int64_t token_layers = 0;  // (token, layer) pairs recomputed: the FLOP count is proportional
  int64_t rows_written = 0;  // (token, layer) rows overwritten in the pool (each: all channels)
  double flops = 0;          // forward FLOPs spent (GEMMs and attention; 2 per multiply-add)
};

// Every attention family (MHA/GQA, MLA). Fails before touching the pool on a bad plan.
Status recompute_tokens(Engine& engine, KvPool& kv, SeqId seq, const RecomputePlan& plan,
                        RecomputeStats* stats = nullptr);

// Observers for the baselines: the hidden rows entering one layer, and the attention mass each
// key receives summed over layers, heads and queries.
class CaptureLayerInput : public ForwardObserver {
 public:
  explicit CaptureLayerInput(int layer) : layer_(layer) {}
  void layer_input(int layer, const float* x, int n, int dim) override;
  std::vector<float> rows;  // n x dim, appended per micro-batch

 private:
  int layer_;
};

class KeyMassSum : public ForwardObserver {
 public:
  float* key_mass(int layer, int n_keys) override;
  std::vector<float> mass;  // per sequence token
};

}  // namespace kamera
