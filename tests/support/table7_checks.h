// The paper's Table 7 protocol on a media pair (PictureReuseBench, AudioReuseBench): the reuse
// harness's result for items whose chunk B is one picture or clip behind a random-token
// antecedent, printed and held to what the protocol says (random weights: properties of the
// reuse path, not accuracy):
//   - relocation: the canonical's keys rotated to B's place equal a prefill there (f32 rounding);
//   - the full-rank patch rebuilds KV(B | A) (f32 rounding) and its KL to re-prefill is ~0;
//   - the rank-8 patch closes part of blind reuse's KL (eta > 0), where blind reuse has one.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "eval/reuse_bench.h"

namespace table7 {

inline const kamera::ArmSummary* arm(const kamera::ReuseBenchResult& r, const std::string& name,
                                     int rank) {
  for (const kamera::ArmSummary& a : r.arms)
    if (a.name == name && a.rank == rank) return &a;
  return nullptr;
}

// The checks on a run with ranks {8, kFullRank}; `rows`: B's rows.
inline void expect_protocol(const kamera::ReuseBenchResult& r, const char* pair, int rows) {
  const kamera::ArmSummary *blind = arm(r, "blind", 0), *r8 = arm(r, "patch", 8),
                           *full = arm(r, "patch", kamera::kFullRank);
  ASSERT_TRUE(blind && r8 && full);
  std::printf(
      "%s: B %.0f rows; relocation max rel err %.2e (layer-0 ULP %lld); full-rank rebuild %.2e; "
      "KL blind %.3e, rank 8 %.3e (eta %.3f), full %.2e (eta %.6f)\n",
      pair, r.mean_chunk_tokens, r.relocation_max_rel_err, (long long)r.relocation_max_ulp_layer0,
      r.full_rank_max_rel_err, blind->kl, r8->kl, r8->eta, full->kl, full->eta);
  EXPECT_EQ(r.mean_chunk_tokens, rows);
  EXPECT_LT(r.relocation_max_rel_err, 1e-5);
  EXPECT_LT(r.full_rank_max_rel_err, 1e-5);
  EXPECT_LT(full->kl, 1e-9);
  EXPECT_GT(blind->kl, 1e-6);  // the antecedent changes B's KV: a deficit to close
  EXPECT_GT(r8->eta, 0.0);
  EXPECT_LT(r8->kl, blind->kl);
}

}  // namespace table7
