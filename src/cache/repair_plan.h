// Repair paid from a budget: of the segments a prompt would be served from another context (rows
// of the nearest context relocated, a canonical plus another context's patch: every hit but rows
// computed behind the very same antecedents), which ones are recomputed in context instead.
//
// Each candidate gets a deficit estimate made without a forward (deficit_estimate: how much the
// context it was computed in differs from the request's), per token. The budget is a share of the
// candidates' tokens (the request's "reuse_budget", `kamera serve --reuse-budget`); candidates are
// chosen by estimate, highest first (ties: the one nearer the query), each one whole, while its
// tokens fit what is left. A chosen segment is prefilled in context, behind the rows the sequence
// holds by then, in the same forward as the tokens around it that nothing held
// (PromptAssembler::serve_segments); budget 0 chooses none (the plain reuse, unchanged).
//
// Segment granularity: a segment is recomputed whole or not at all.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cache/segment_index.h"

namespace kamera {

// What the estimate of one candidate is made from: the request's antecedents of the segment
// (the segments before it), the antecedents of the occurrence it would be served from (-1:
// unknown, a segment fetched from the store), how many of them the two share in order, whether
// the stored KV is exactly what that context computed (rows; else a canonical plus a low-rank
// patch).
struct DeficitInputs {
  int request_antecedents = 0;
  int stored_antecedents = -1;
  int shared = 0;
  bool rows = true;
};

// The estimated deficit of a candidate's rows per token, in [0, 1]: the share of the two
// contexts' antecedents that are not common to both (missing from the occurrence's, or in it but
// not in the request's), so 0 for the same context and 1 for none shared. A candidate with the
// same antecedents that is still not exact (rows computed behind reused KV, or a rank-limited
// patch) gets a small floor, so that it ranks below every changed context but above nothing.
double deficit_estimate(const DeficitInputs& in);

// The estimate of a hit of the segment index for a segment with `request_antecedents` segments
// before it in the request.
double deficit_estimate(const SegmentIndex::Hit& h, size_t request_antecedents);

struct RepairCandidate {
  size_t segment = 0;  // its index in the plan
  int tokens = 0;
  double estimate = 0;  // per token
};

// The candidates chosen for recompute (indices into `c`) under `budget` (a share in [0, 1] of the
// candidates' tokens): highest estimate per token first, ties to the later segment, each taken
// whole while its tokens fit what is left; none with estimate 0.
std::vector<size_t> choose_repairs(std::span<const RepairCandidate> c, double budget);

}  // namespace kamera
