// A conversation keeps what it was answered from (cache/prefix_index.h, "Exact and approximate
// rows"): a turn served a message from another conversation's context leaves its whole prompt in
// the prefix index as an approximate entry, the next turn extends it recomputing only its new
// tokens and reports the reused rows as prefix-approximate, while prefix-only reuse ("reuse":
// "prefix") still recomputes them and answers as a cold run does.
#include <gtest/gtest.h>

#include "cache/prompt_assembler.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

int64_t tokens_from(const Assembly& a, SpanSource source) {
  int64_t n = 0;
  for (const ServedSegment& s : a.spans)
    if (s.source == source) n += s.tokens;
  return n;
}

// The prompt tokens a serve put through a forward (the runs before the query and the query).
int64_t recomputed(const Assembly& a) {
  return a.recomputed + a.query.n();
}

struct Conversations {
  tiny::ContextRig rig{"qwen2", 4000, 16};
  std::unique_ptr<PromptAssembler> pa;
  std::vector<std::vector<int32_t>> parts;  // one segment each

  Conversations() {
    AssemblerOptions o;
    o.segment_cache_bytes = int64_t(64) << 20;
    o.compact_tokens = 0;
    pa = std::make_unique<PromptAssembler>(*rig.cache, o);
    const int vocab = rig.model->cfg.n_vocab;
    // 0, 1: two system prompts; 2: the shared message; 3, 4: first questions; 5: a reply;
    // 6: a second question; 7: a reply; 8: a third question
    const int sizes[] = {24, 24, 30, 20, 20, 6, 5, 6, 5};
    for (uint32_t i = 0; i < 9; ++i) parts.push_back(tiny::random_tokens(sizes[i], vocab, 40 + i));
  }
  PromptPlan plan(std::initializer_list<int> ids, ReusePolicy policy = ReusePolicy::Patch) {
    PromptPlan p = plan_start(*rig.cache, policy);
    for (int i : ids) plan_text(p, *rig.cache, nullptr, parts[size_t(i)]);
    return p;
  }
  // Serves the plan; with a reply (a part's index), its rows follow the prompt's as a decode
  // leaves them, and the prompt and reply are kept as the server keeps them after a turn.
  std::vector<float> turn(const PromptPlan& p, Assembly& a, int reply = -1) {
    auto logits = pa->serve(p, a);
    EXPECT_TRUE(logits.ok()) << logits.message();
    if (reply >= 0) {
      const std::vector<int32_t>& r = parts[size_t(reply)];
      EXPECT_TRUE(
          rig.cache->forward_chunk(a.seq, ChunkContent::from_tokens(r), p.next_position).ok());
      pa->remember(p, a, a.seq, r);
      pa->keep_segments(p, a, a.seq);
    }
    rig.pool->free_sequence(a.seq);
    return logits.ok() ? *logits : std::vector<float>{};
  }
};

}  // namespace

TEST(ConversationKeeps, ALaterTurnReusesTheRowsItsFirstTurnWasAnsweredFrom) {
  Conversations c;
  Assembly c1;
  c.turn(c.plan({0, 2, 3}), c1, 7);  // conversation 1: its system prompt, the message, a question
  Assembly t1;
  c.turn(c.plan({1, 2, 4}), t1, 5);  // conversation 2: the message from conversation 1's context
  ASSERT_EQ(tokens_from(t1, SpanSource::ContextNearest), 30);
  // Turn 2 resends turn 1, its reply and a new question: only the question is recomputed; the
  // message, the first question and the reply come from turn 1's rows, reported approximate
  // (before: the reply was recomputed, and the first question served from the segment index).
  Assembly t2;
  c.turn(c.plan({1, 2, 4, 5, 6}), t2, 7);
  EXPECT_EQ(recomputed(t2), 5);
  EXPECT_EQ(tokens_from(t2, SpanSource::Prefix), 24);
  EXPECT_EQ(tokens_from(t2, SpanSource::PrefixApproximate), 30 + 20 + 6);
  EXPECT_EQ(t2.prefix_exact, c.rig.cache->anchor_extent() + 24);
  EXPECT_EQ(c.pa->counters().prefix_approximate.load(), 1);
  // The same turn under prefix-only reuse: the exact prefix only (the system prompt), everything
  // past it recomputed, and the cold run's logits.
  Assembly exact, cold;
  const std::vector<float> got = c.turn(c.plan({1, 2, 4, 5, 6}, ReusePolicy::Prefix), exact);
  const std::vector<float> ref = c.turn(c.plan({1, 2, 4, 5, 6}, ReusePolicy::Reprefill), cold);
  EXPECT_EQ(tokens_from(exact, SpanSource::PrefixApproximate), 0);
  EXPECT_EQ(recomputed(exact), 30 + 20 + 6 + 5);
  EXPECT_LT(tiny::max_abs_diff(got, ref), 1e-4);
  // Turn 3 extends turn 2's entry; the segment it computes behind those approximate rows (its
  // question) is not kept as exact (found behind the same antecedents, but not as their rows).
  Assembly t3;
  const PromptPlan p3 = c.plan({1, 2, 4, 5, 6, 7, 8});
  c.turn(p3, t3, 5);
  EXPECT_EQ(recomputed(t3), 5);
  EXPECT_EQ(tokens_from(t3, SpanSource::PrefixApproximate), 30 + 20 + 6 + 5 + 6);
  std::vector<ChunkId> ante;
  for (size_t i = 0; i < 6; ++i) ante.push_back(p3.segments[i].id);
  const SegmentIndex::Hit h = c.pa->segments()->find(p3.segments[6].id, ante, false);
  EXPECT_TRUE(h.found());
  EXPECT_NE(h.match, SegmentIndex::Match::Exact);
}
