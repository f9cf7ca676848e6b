// What an output-aware patch needs, gathered from the conditioned forward that forms the patch
// (no extra forward): per GQA layer the rotated query rows of the forwarded tokens and the
// attention mass every key received. OutputStats::weights() turns them into the K and V channel
// weights of one chunk (reuse/patch_output.h, docs/PATCHES.md).
//
// K frame. The stored keys are pre-rotation: a query q_i (rotated to p_i) scores key j as
// q_i . R(p_j) k_j = (R(p_j)^T q_i) . k_j, so the query "seen" by the stored row j is R(-p_j) q_i,
// which depends on the pair (i, j). The K weight per KV head is the average over j of
// R(-p_j) S R(-p_j)^T, S = sum_i q_i q_i^T over its query heads and the chunk's later query rows:
// exact for the non-rotary dims and for a per-row error that is the same on every row; on the
// rotary dims it is the rows' average relative phase (the exact weight differs per row j).
#pragma once

#include <span>
#include <vector>

#include "kv/pool.h"
#include "model/forward.h"
#include "reuse/patch_output.h"

namespace kamera {

class OutputStats : public ForwardObserver {
 public:
  // first_token: the sequence index of the first token the observed forwards add.
  OutputStats(const ModelConfig& cfg, int first_token);

  void layer_queries(int layer, const float* q, int n, int width) override;
  float* key_mass(int layer, int n_keys) override;

  // Weights of the chunk at sequence tokens [first, first + n) whose keys sit at `positions` (its
  // n positions in the observed forward): K from the query rows at tokens >= first, V rows from
  // the mass each of its rows received, V columns from W_o. Fails when the forwards did not cover
  // the chunk, or for MLA layers. Per layer kind (model/layer_kinds.h): NoRope layers' queries
  // are not rotated; Local layers' are by `local_rope` (required when the model has them).
  Result<OutputWeights> weights(const Model& model, const RopeCache& rope, int first, int n,
                                std::span<const Pos> positions,
                                const RopeCache* local_rope = nullptr) const;
  // Floats held (the extra memory of a compile that gathers them).
  size_t floats() const;

 private:
  ModelConfig cfg_;
  int first_token_ = 0;
  std::vector<std::vector<float>> queries_;  // [layer] rows x q_width, from first_token_ on
  std::vector<std::vector<float>> mass_;     // [layer] per sequence token
};

// The column Gram of the V channel of a GQA layer: G = W'^T W' (kv_width x kv_width), W' = W_o
// with the columns of the query heads sharing a KV head summed.
std::vector<double> value_gram(const Model& model, int layer);

}  // namespace kamera
