// The repair budget (cache/repair_plan.h): of the segments a prompt would be served from another
// context, the ones whose context differs most are recomputed in context, whole, while the
// budget's share of their tokens lasts; budget 0 is the plain reuse, budget 1 a re-prefill.
#include <gtest/gtest.h>

#include <cstring>

#include "cache/prompt_assembler.h"
#include "cache/repair_plan.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

// The segments of the prompts below: each its own random tokens (one segment per plan_text
// without a tokenizer).
enum Seg { A, B, C, X, Q };
const int kTokens[] = {20, 24, 30, 12, 5};

PromptPlan plan_of(const tiny::ContextRig& rig, std::initializer_list<Seg> segs,
                   ReusePolicy policy = ReusePolicy::Patch, double budget = 0) {
  PromptPlan p = plan_start(*rig.cache, policy);
  p.reuse_budget = budget;
  for (Seg s : segs)
    plan_text(p, *rig.cache, nullptr,
              tiny::random_tokens(kTokens[s], rig.model->cfg.n_vocab, uint32_t(s) + 1));
  return p;
}

// An assembler that has served [A, B, C, Q] once (no prefix index: every reused row comes from
// the segment index), then serves [A, X, B, C, Q]: A behind its own antecedents (exact), X new,
// B and C behind a context that lacks X (B's differs more: one antecedent missing of two).
struct Trace {
  tiny::ContextRig rig{"qwen2", 4000, 16};
  std::unique_ptr<PromptAssembler> pa;
  Trace() {
    AssemblerOptions o;
    o.prefix_cache_tokens = 0;
    o.segment_cache_bytes = int64_t(64) << 20;
    o.compact_tokens = 0;
    pa = std::make_unique<PromptAssembler>(*rig.cache, o);
    const PromptPlan first = plan_of(rig, {A, B, C, Q});
    Assembly a;
    EXPECT_TRUE(pa->serve(first, a).ok());
    pa->keep_segments(first, a, a.seq);
    rig.pool->free_sequence(a.seq);
  }
  // The second prompt's logits and assembly (its sequence freed).
  std::vector<float> serve(ReusePolicy policy, double budget, Assembly& a) {
    const PromptPlan p = plan_of(rig, {A, X, B, C, Q}, policy, budget);
    auto l = pa->serve(p, a);
    EXPECT_TRUE(l.ok()) << l.message();
    rig.pool->free_sequence(a.seq);
    return l.ok() ? *l : std::vector<float>{};
  }
};

const ServedSegment* span_at(const Assembly& a, int32_t position) {
  for (const ServedSegment& s : a.spans)
    if (s.position == position && s.id) return &s;
  return nullptr;
}

}  // namespace

TEST(DeficitEstimate, GrowsWithTheAntecedentsTheTwoContextsDoNotShare) {
  const double same = deficit_estimate(DeficitInputs{3, 3, 3, true});
  const double one_missing = deficit_estimate(DeficitInputs{3, 2, 2, true});
  const double two_missing = deficit_estimate(DeficitInputs{3, 1, 1, true});
  const double none_shared = deficit_estimate(DeficitInputs{3, 3, 0, true});
  EXPECT_GT(same, 0.0);  // not exact, or it would not be a candidate
  EXPECT_LT(same, one_missing);
  EXPECT_LT(one_missing, two_missing);
  EXPECT_LT(two_missing, none_shared);
  EXPECT_DOUBLE_EQ(none_shared, 1.0);
}

TEST(ChooseRepairs, HighestEstimateFirstWholeSegmentsWithinTheBudget) {
  const RepairCandidate c[] = {{1, 40, 0.2}, {2, 10, 0.9}, {3, 30, 0.5}, {4, 20, 0.5}};
  EXPECT_TRUE(choose_repairs(c, 0.0).empty());
  // 100 tokens: 0.35 pays 35: segment 2 (0.9, 10), then of the 0.5 ties the later one (4, 20);
  // segment 3 (30) no longer fits.
  EXPECT_EQ(choose_repairs(c, 0.35), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(choose_repairs(c, 1.0), (std::vector<size_t>{0, 1, 2, 3}));
}

// Budget 0: the reuse as it was before the budget, byte for byte (the same sources, the same
// logits to the bit as a plan that names no budget); the candidates are counted, none recomputed.
TEST(RepairBudget, ZeroServesEverySegmentAsBefore) {
  Trace t;
  Assembly none, zero;
  const std::vector<float> ref = t.serve(ReusePolicy::Patch, 0, none);
  const std::vector<float> got = t.serve(ReusePolicy::Patch, 0.0, zero);
  ASSERT_EQ(got.size(), ref.size());
  EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0);
  EXPECT_EQ(zero.repaired, 0);
  EXPECT_EQ(zero.repair_candidates, kTokens[B] + kTokens[C]);
  EXPECT_EQ(zero.reused, kTokens[A] + kTokens[B] + kTokens[C]);
  ASSERT_EQ(zero.spans.size(), none.spans.size());
  for (size_t i = 0; i < zero.spans.size(); ++i) {
    EXPECT_EQ(zero.spans[i].source, none.spans[i].source);
    EXPECT_FALSE(zero.spans[i].repaired);
  }
}

// Budget 1: every segment held from another context is recomputed in context: the logits are a
// re-prefill's (to the tolerance of its other batch shapes), where the plain reuse is far off.
TEST(RepairBudget, OneGivesTheLogitsOfAReprefill) {
  Trace t;
  Assembly full, plain, ref;
  const std::vector<float> repaired = t.serve(ReusePolicy::Patch, 1.0, full);
  const std::vector<float> reused = t.serve(ReusePolicy::Patch, 0.0, plain);
  const std::vector<float> reprefill = t.serve(ReusePolicy::Reprefill, 0.0, ref);
  EXPECT_EQ(full.repaired, kTokens[B] + kTokens[C]);
  EXPECT_EQ(full.reused, kTokens[A]);
  // Each recomputed segment is a span of its own (the last one too, before the query).
  const int32_t anchor = t.rig.cache->anchor_extent();
  for (int32_t at :
       {anchor + kTokens[A] + kTokens[X], anchor + kTokens[A] + kTokens[X] + kTokens[B]}) {
    const ServedSegment* s = span_at(full, at);
    ASSERT_TRUE(s) << at;
    EXPECT_TRUE(s->repaired);
    EXPECT_GT(s->repair_estimate, 0);
  }
  const double err = tiny::max_abs_diff(repaired, reprefill);
  EXPECT_LT(err, 1e-4);
  EXPECT_GT(tiny::max_abs_diff(reused, reprefill), 100 * std::max(err, 1e-6))
      << "the trace must be one where the plain reuse differs";
}

// An intermediate budget pays for the segment whose context differs most (B: one of its two
// antecedents missing; C: one of three) and never more tokens than its share.
TEST(RepairBudget, AnIntermediateBudgetRecomputesTheHighestEstimateFirst) {
  Trace t;
  Assembly a;
  const double budget = 0.5;  // 27 of B's and C's 54 tokens: B (24) fits, C (30) then does not
  t.serve(ReusePolicy::Patch, budget, a);
  const int32_t anchor = t.rig.cache->anchor_extent();
  const ServedSegment* b = span_at(a, anchor + kTokens[A] + kTokens[X]);
  const ServedSegment* c = span_at(a, anchor + kTokens[A] + kTokens[X] + kTokens[B]);
  ASSERT_TRUE(b && c);
  EXPECT_TRUE(b->repaired);
  EXPECT_EQ(b->source, SpanSource::Recomputed);
  EXPECT_FALSE(c->repaired);
  EXPECT_EQ(c->source, SpanSource::ContextNearest);
  EXPECT_GT(b->repair_estimate, c->repair_estimate);
  EXPECT_EQ(a.repaired, kTokens[B]);
  EXPECT_LE(double(a.repaired), budget * double(a.repair_candidates));
  EXPECT_EQ(a.reused, kTokens[A] + kTokens[C]);
}
