// The output-aware patch as a harness arm (reuse/patch_output.h, docs/PATCHES.md): like PatchArm,
// but each block is factored under the weights gathered from the conditioned forward of the
// reused chunks (the forward compile runs to read KV(B | A); here repeated once per item, untimed,
// with the statistics observer attached, and shared by every rank).
#pragma once

#include <memory>
#include <vector>

#include "eval/arm.h"
#include "reuse/patch_output.h"

namespace kamera {

// What gathering the weights and forming the patches cost, summed over items (compile's extra
// cost; printed to stderr when the arms are destroyed).
struct OutputCompileCost {
  int items = 0;
  double forward_ms = 0;     // the conditioned forward with the observer attached
  double weights_ms = 0;     // statistics -> weights (K moments, W_o Grams)
  double form_ms = 0;        // form_output_patch, every rank
  double svd_form_ms = 0;    // form_patch at the same ranks, for comparison
  size_t max_floats = 0;     // the observer's floats, largest item
  size_t weight_floats = 0;  // the weights' doubles, largest item
};

// Per item: each reused chunk's output weights.
struct OutputWeightsCache {
  const EvalItem* item = nullptr;
  int index = -1;
  std::vector<OutputWeights> weights;  // per reused chunk
  OutputCompileCost cost;
  // Diagnostic oracle: the observed forward continues with the item's first query, so the K
  // moments and V masses include the queries that will actually read B (not known at compile).
  bool with_query = false;
  ~OutputWeightsCache();
};

class OutputPatchArm : public Arm {
 public:
  OutputPatchArm(ArmKey key, PatchOptions opts, std::shared_ptr<OutputWeightsCache> cache)
      : Arm(std::move(key)), opts_(std::move(opts)), cache_(std::move(cache)) {}
  Result<bool> prepare(const PreparedItem& it) override;
  Result<ArmBuild> build(const PreparedItem& it, SeqId seq) override;

 private:
  PatchOptions opts_;
  std::shared_ptr<OutputWeightsCache> cache_;
  std::vector<Patch> patches_;
};

// Fills `cache` for the item unless it already holds it: one forward of the reused chunks after
// the prefix with an OutputStats observer.
Status gather_output_weights(const PreparedItem& it, OutputWeightsCache& cache);

}  // namespace kamera
