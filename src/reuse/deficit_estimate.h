// Cheap estimates of how much a reused segment's rows would change in a new context, computed
// without the conditioned forward over [anchor · new antecedents · B] (issue 52 item 3; the
// paper's appendix B calls this the open problem: no free selector locates the deficit).
//
// The served rows of segment B are rows computed behind another context (an occurrence, KV(B|A))
// or the canonical plus a stored patch (C_B + U_m Σ_m V_mᵀ). What a re-prefill would hold is
// KV(B|A'). Every estimator here reads only what a server already holds: the antecedent ids of the
// stored occurrence and of the request, the occurrence's rows, the canonical, the patch's singular
// values, the antecedents' canonicals. They are pure functions of typed data.
//
//   (a) context_distance    token-weighted distance between the stored and the new antecedent
//                           lists (ids in order, longest common subsequence)
//   (b) relative_distance   ||a − b||_F / ||b||_F over chosen layers: the segment's sensitivity to
//                           context, from two occurrences or occurrence vs canonical
//   (c) residual_share      the deficit's energy past rank m (what a rank-m patch leaves out)
//   (d) key_centroid +      how far the new antecedents' canonical keys sit from the old ones'
//       centroid_distance
//   estimate_row_change     the combination the measurement recommends (docs/RESULTS.md, "Cheap Δ
//                           estimation (issue 52)")
#pragma once

#include <span>
#include <vector>

#include "reuse/chunk.h"
#include "reuse/chunk_kv.h"
#include "reuse/patch.h"

namespace kamera {

// One antecedent of a context: the segment's id and how many tokens (rows) it has.
struct Antecedent {
  ChunkId id;
  int tokens = 0;
};

// (a) 1 − W / T: each antecedent weighs its tokens times decay^j, j the number of antecedents
// between it and the segment (0: adjacent), T is the total weight of both lists and W the
// heaviest common subsequence (matched by id, in order; a matched pair counts both sides'
// weights). decay = 1: token-weighted. 0 for the same list (and for two empty lists), 1 when
// nothing is shared; removing antecedents from one side raises it monotonically (decay 1: r of T
// tokens removed gives r / (2T − r)); a reorder raises it by what falls out of the common
// subsequence; decay < 1 counts a change far from the segment less. O(|stored|·|now|).
double context_distance(std::span<const Antecedent> stored, std::span<const Antecedent> now,
                        double decay = 1.0);

// (b) ||a − b||_F / ||b||_F over layers [first_layer, n_layers) and every channel. a, b: the same
// layout and token count (n_tokens x width per (layer, channel), any dtype); 0 when a == b, and 0
// when ||b|| = 0 and a == b. Shapes that differ: -1. first_layer = n_layers / 2: the deep half,
// where the deficit lives.
double relative_distance(const ChunkKV& a, const ChunkKV& b, int first_layer = 0);

// (c) sqrt(Σ_(layer, channel) Σ_(i ≥ rank) σ_i²) / sqrt(Σ conditioned_norm²) from form_patch's
// DeltaStats: the part of the deficit a rank-m patch leaves out, relative to the rows. 0 when the
// rank covers every singular value; kFullRank: 0.
double residual_share(std::span<const DeltaStats> stats, int rank);

// (d) The token-weighted mean of the canonical key rows (channel 0) of a context's antecedents,
// over layers [first_layer, n_layers): one vector of (n_layers − first_layer) · width floats
// (empty for no antecedent). canonicals: one ChunkKV per antecedent, the same layout.
std::vector<float> key_centroid(std::span<const ChunkKV* const> canonicals, int first_layer = 0);
// 1 − cos(a, b); 0 when either is empty or zero (nothing to compare); a, b: the same length.
double centroid_distance(std::span<const float> a, std::span<const float> b);

// The recommended estimate of the served rows' relative change in a new context, for the request
// path: sensitivity · context_distance(stored, now, kRecommendedDecay) + residual.
//   sensitivity: relative_distance(occurrence rows, canonical) over every layer, measured once
//                when the canonical is formed (off the request path); 1 when no canonical
//                exists yet (then the estimate is the context distance alone);
//   residual:    residual_share(stats, m) of the patch served (0 for the occurrence's own rows).
// 0 for the same antecedents served from their own rows. How well it ranks cases by KL, and where
// "skip repair below t" is safe: docs/RESULTS.md, "Cheap Δ estimation (issue 52)".
inline constexpr double kRecommendedDecay = 0.5;
double estimate_row_change(std::span<const Antecedent> stored, std::span<const Antecedent> now,
                           double sensitivity, double residual = 0);

}  // namespace kamera
