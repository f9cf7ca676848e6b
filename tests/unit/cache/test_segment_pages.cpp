// Segment occurrences held as pool pages (cache/segment_index.h): storing one is a fork of the
// pages that computed it and serving one a pool-to-pool copy, never a round trip through heap rows.
#include <gtest/gtest.h>

#include "cache/prompt_assembler.h"
#include "reuse/chunk_kv.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

// A sequence of n tokens (their rows left as the pool has them: the budget counts pages).
SeqId sequence(KvPool& pool, int n) {
  const SeqId s = pool.create_sequence();
  EXPECT_TRUE(pool.append(s, tiny::linear_positions(n)).ok());
  return s;
}

std::vector<int32_t> tokens(int n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = first + i;
  return t;
}

ChunkId seg(uint64_t n) {
  return ChunkId{n, n * 31 + 7};
}

int64_t tokens_from(const Assembly& a, SpanSource source) {
  int64_t n = 0;
  for (const ServedSegment& s : a.spans)
    if (s.source == source) n += s.tokens;
  return n;
}

}  // namespace

// A prompt's segments kept, then served again behind the same antecedents: the rows never pass
// through a heap ChunkKV (none is allocated from the keep to the warm serve), and the warm logits
// are the cold run's.
TEST(SegmentPages, KeepingAndServingASegmentAllocatesNoHeapRows) {
  tiny::ContextRig rig("qwen2", 4000, 16);
  AssemblerOptions o;
  o.prefix_cache_tokens = 0;  // every reused row comes from the segment index
  o.segment_cache_bytes = int64_t(64) << 20;
  o.compact_tokens = 0;
  PromptAssembler pa(*rig.cache, o);
  const int vocab = rig.model->cfg.n_vocab;
  PromptPlan plan = plan_start(*rig.cache);
  plan_text(plan, *rig.cache, nullptr, tiny::random_tokens(40, vocab, 1));
  plan_text(plan, *rig.cache, nullptr, tiny::random_tokens(24, vocab, 2));
  plan_text(plan, *rig.cache, nullptr, tiny::random_tokens(5, vocab, 3));
  ASSERT_EQ(plan.segments.size(), 3u);
  Assembly cold;
  auto ref = pa.serve(plan, cold);
  ASSERT_TRUE(ref.ok()) << ref.message();
  const int64_t before = chunk_kv_bytes_allocated();
  pa.keep_segments(plan, cold, cold.seq);
  rig.pool->free_sequence(cold.seq);
  Assembly warm;
  auto got = pa.serve(plan, warm);
  ASSERT_TRUE(got.ok()) << got.message();
  pa.keep_segments(plan, warm, warm.seq);
  const int64_t heap = chunk_kv_bytes_allocated() - before;
  EXPECT_EQ(tokens_from(warm, SpanSource::ContextExact), 64);
  EXPECT_EQ(heap, 0) << "bytes of heap rows allocated by keeping and serving the segments";
  EXPECT_LT(tiny::max_abs_diff(*got, *ref), 1e-4);
  rig.pool->free_sequence(warm.seq);
}

// One budget over prefix entries and segment occurrences, in pool pages each counted once: filled
// with prefixes, then segments arrive (the least recently used prefix gives its tails back), then
// the prefixes are used again and another segment arrives (the oldest segment goes). The pages
// held never pass the budget, and are all the pool holds once the requests are gone.
TEST(SegmentPages, OneBudgetEvictsAcrossPrefixesAndSegmentsLeastRecentlyUsedFirst) {
  tiny::ContextRig rig("qwen2", 4000, 16);
  KvPool& pool = *rig.pool;
  const int64_t page_bytes = int64_t(pool.arena_bytes()) / pool.n_pages();
  AssemblerOptions o;
  o.prefix_cache_tokens = 4 * 16;          // 4 pages
  o.segment_cache_bytes = 4 * page_bytes;  // 4 pages
  PromptAssembler pa(*rig.cache, o);
  ASSERT_EQ(pa.budget_pages(), 8);
  PrefixIndex& prefix = *pa.prefix();
  SegmentIndex& segments = *pa.segments();
  const int base = pool.stats().pages_used;
  // Three prompts of two pages each: 6 pages, all prefix.
  std::vector<PrefixIndex::EntryId> entries;
  for (int i = 0; i < 3; ++i) {
    const SeqId s = sequence(pool, 32);
    auto e = prefix.insert(s, tokens(32, 1000 * (i + 1)));
    ASSERT_TRUE(e.ok() && *e >= 0);
    entries.push_back(*e);
    pool.free_sequence(s);
    pa.shrink_cached(pa.budget_pages());
  }
  EXPECT_EQ(pa.cached_pages(), 6);
  // Three segments of a page each: 9 pages wanted, 8 kept; the oldest prefix gave a page.
  for (uint64_t k = 0; k < 3; ++k) {
    const SeqId s = sequence(pool, 16);
    ASSERT_TRUE(segments.insert(seg(k), {}, s, 0, 16).ok());
    pool.free_sequence(s);
    pa.shrink_cached(pa.budget_pages());
    EXPECT_LE(pa.cached_pages(), pa.budget_pages());
  }
  EXPECT_EQ(pa.cached_pages(), 8);
  EXPECT_EQ(pool.stats().pages_used - base, 8);      // what the caches count is what the pool holds
  EXPECT_EQ(prefix.tokens(entries[0]).size(), 16u);  // the least recently used: cut a page
  EXPECT_EQ(prefix.tokens(entries[1]).size(), 32u);
  EXPECT_EQ(prefix.tokens(entries[2]).size(), 32u);
  for (uint64_t k = 0; k < 3; ++k) EXPECT_TRUE(segments.contains(seg(k)));
  // The prefixes used again: now the oldest segment is the least recently used.
  for (int i = 0; i < 3; ++i) {  // as a request is served from one: a fork of its pages
    auto f = prefix.fork_prefix(entries[size_t(i)], 16);
    ASSERT_TRUE(f.ok());
    pool.free_sequence(*f);
  }
  const SeqId s = sequence(pool, 16);
  ASSERT_TRUE(segments.insert(seg(3), {}, s, 0, 16).ok());
  pool.free_sequence(s);
  pa.shrink_cached(pa.budget_pages());
  EXPECT_EQ(pa.cached_pages(), 8);
  EXPECT_FALSE(segments.contains(seg(0)));
  for (uint64_t k = 1; k < 4; ++k) EXPECT_TRUE(segments.contains(seg(k)));
  EXPECT_EQ(prefix.tokens(entries[0]).size(), 16u);
  EXPECT_EQ(prefix.tokens(entries[1]).size(), 32u);
  EXPECT_EQ(prefix.tokens(entries[2]).size(), 32u);
  EXPECT_EQ(pool.stats().pages_used - base, 8);
  // All of it given back: the pool holds nothing of the caches.
  EXPECT_EQ(pa.shrink_cached(0), 0);
  EXPECT_EQ(pool.stats().pages_used, base);
}

// The library's path (ChatSession, the C API) has no scheduler to make room: once cached prompts
// fill the pool up to their budget, a prompt that needs most of the pool is still served, the
// caches giving back the pages it lacks (before, it failed for want of pages).
TEST(SegmentPages, ALongPromptIsServedWhenCachedKvFillsThePool) {
  tiny::ContextRig rig("qwen2", 512, 16);  // 32 pages
  KvPool& pool = *rig.pool;
  AssemblerOptions o;
  o.prefix_cache_tokens = 16 * 16;  // 16 pages
  o.segment_cache_bytes = int64_t(8) * int64_t(pool.arena_bytes()) / pool.n_pages();
  o.compact_tokens = 0;
  PromptAssembler pa(*rig.cache, o);
  const int vocab = rig.model->cfg.n_vocab;
  for (uint64_t k = 0; k < 6; ++k) {  // distinct two-segment prompts, kept
    PromptPlan plan = plan_start(*rig.cache);
    plan_text(plan, *rig.cache, nullptr, tiny::random_tokens(40, vocab, 10 + k));
    plan_text(plan, *rig.cache, nullptr, tiny::random_tokens(24, vocab, 20 + k));
    Assembly a;
    ASSERT_TRUE(pa.serve(plan, a).ok());
    pa.remember(plan, a, a.seq, {});
    pa.keep_segments(plan, a, a.seq);
    pool.free_sequence(a.seq);
  }
  const int64_t held = pa.cached_pages();
  EXPECT_GT(held, 16) << "the caches hold more than half the pool";
  PromptPlan big = plan_start(*rig.cache);
  plan_text(big, *rig.cache, nullptr, tiny::random_tokens(400, vocab, 99));  // 25+ pages
  Assembly a;
  auto l = pa.serve(big, a);
  ASSERT_TRUE(l.ok()) << l.message();
  EXPECT_LT(pa.cached_pages(), held);
  pool.free_sequence(a.seq);
}
