// Measurements of the reuse bench that are not arms: relocation exactness, the deficit's anatomy
// (per layer and channel, head diffuseness), full-rank reconstruction, and the compile cost of a
// patch. Each runs on an item the driver prepared (eval/arm.h).
#pragma once

#include <vector>

#include "eval/arm.h"
#include "eval/reuse_bench.h"

namespace kamera {

// Canonical keys relocated to the chunk's place vs the keys a prefill of [anchor · chunk] placed
// there writes (same antecedent: only position moves). Folds into res.relocation_*.
Status probe_relocation(const PreparedItem& it, ReuseBenchResult& res);

// The full-rank all-layer patch's (po) deficit statistics (folded into res.anatomy, summed over
// items) and its reconstruction error against the conditioned rows (res.full_rank_*_channel).
Status probe_deficit(const PreparedItem& it, const PatchOptions& po, bool first_item,
                     ReuseBenchResult& res);

// Share of (layer x KV head) cells (MLA: layer x channel) holding 90% of the deficit's energy;
// NAN when the deficit is zero.
double head_cells_for_90(const PreparedItem& it);

// Time of one patch's compile: the conditioned forward over [anchor · chunks] and the
// factorization at `rank`.
Result<double> compile_ms(const PreparedItem& it, const PatchOptions& po);

}  // namespace kamera
