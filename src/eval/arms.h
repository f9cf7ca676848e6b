// The reuse protocol's own arms (docs/METHOD.md): blind reuse, the rank-m patch (all
// layers, the deepest half, or listed layers), the "B may not attend to A" mask oracle, and a
// patch from a fixed per-layer basis. The literature's baselines are in eval/baselines.h.
#pragma once

#include <memory>
#include <vector>

#include "eval/arm.h"
#include "reuse/patch.h"

namespace kamera {

// Every reused chunk from its canonical, relocated: no conditioning.
class BlindArm : public Arm {
 public:
  BlindArm() : Arm({"blind", 0, ""}) {}
  Result<ArmBuild> build(const PreparedItem& it, SeqId seq) override;
};

// Every reused chunk from its canonical plus its rank-m patch, formed (untimed, in prepare) from
// the deficit between its re-prefilled rows and its canonical. ArmBuild.cost: the factors' bytes
// and the patch GEMMs.
class PatchArm : public Arm {
 public:
  PatchArm(ArmKey key, PatchOptions opts) : Arm(std::move(key)), opts_(std::move(opts)) {}
  Result<bool> prepare(const PreparedItem& it) override;
  Result<ArmBuild> build(const PreparedItem& it, SeqId seq) override;
  const std::vector<Patch>& patches() const { return patches_; }

 private:
  PatchOptions opts_;
  std::vector<Patch> patches_;  // per reused chunk, for the current item
};

// One forward where each reused chunk may not attend to the exact chunks before it (the
// position-matched control: conditioning removed at the chunk's native positions).
class OracleMaskArm : public Arm {
 public:
  OracleMaskArm() : Arm({"oracle_mask", 0, ""}) {}
  Result<ArmBuild> build(const PreparedItem& it, SeqId seq) override;
};

// The patch options every harness arm uses: rank capped at min(n, width) of each block.
PatchOptions harness_patch_options(const Model& model, int rank, const LayerSet& layers,
                                   DType dtype = DType::F32, bool per_head = false,
                                   SvdMethod method = SvdMethod::Auto);

// Places every reused chunk's canonical (+ patch i when given) at its position (zero forwards).
Status place_reused(const PreparedItem& it, SeqId seq, const std::vector<Patch>* patches);

// What a patch arm serves and costs: each reused canonical plus its patch (patches[i] for
// it.reused[i]), the patches' bytes and GEMM FLOPs, and their bytes as a share of the chunks' KV.
ArmBuild patched_build(const PreparedItem& it, const std::vector<Patch>& patches);

}  // namespace kamera
