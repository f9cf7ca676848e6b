// The segment index (cache/segment_index.h): a segment's conditioned KV found again behind the
// same antecedents (exact), the nearest ones (most shared in order), or the latest; a byte budget
// with LRU eviction that never takes rows a caller holds.
#include <gtest/gtest.h>

#include "cache/segment_index.h"

using namespace kamera;

namespace {

ChunkId id(uint64_t n) {
  return ChunkId{n, n * 31 + 7};
}

// Rows whose first value tells which context they were computed in.
ChunkKV rows(float tag, int n_tokens = 4) {
  KvLayout layout;
  layout.n_layers = 1;
  layout.channels = {{"k", 2, true}};
  ChunkKV kv(layout, n_tokens, DType::F32);
  kv.at(0, 0).f32_data()[0] = tag;
  return kv;
}

float tag(const SegmentIndex::Hit& h) {
  return h.kv->at(0, 0).f32_data()[0];
}

}  // namespace

TEST(SegmentIndex, CommonInOrderIsTheLongestCommonSubsequence) {
  const std::vector<ChunkId> a = {id(1), id(2), id(3), id(4)}, b = {id(2), id(4), id(3)};
  EXPECT_EQ(common_in_order(a, b), 2);
  EXPECT_EQ(common_in_order(a, a), 4);
  EXPECT_EQ(common_in_order(a, {}), 0);
  EXPECT_EQ(common_in_order(std::vector<ChunkId>{id(9)}, a), 0);
}

TEST(SegmentIndex, FindsTheExactContextElseTheNearestElseNothing) {
  SegmentIndex idx({1 << 20, 4});
  idx.insert(id(5), {id(1), id(2), id(3)}, rows(1));  // a window o1 o2 o3 before o5
  idx.insert(id(5), {id(9)}, rows(2));                // another context, more recent
  SegmentIndex::Hit h = idx.find(id(5), std::vector<ChunkId>{id(1), id(2), id(3)}, false);
  ASSERT_TRUE(h.kv);
  EXPECT_EQ(h.match, SegmentIndex::Match::Exact);
  EXPECT_EQ(tag(h), 1);
  // The window slid: o1 left. Nearest is the window it was computed in (2 shared), not the latest.
  h = idx.find(id(5), std::vector<ChunkId>{id(2), id(3)}, false);
  EXPECT_EQ(h.match, SegmentIndex::Match::Nearest);
  EXPECT_EQ(h.shared, 2);
  EXPECT_EQ(tag(h), 1);
  // latest: the most recently used occurrence whatever its antecedents.
  idx.find(id(5), std::vector<ChunkId>{id(9)}, false);
  h = idx.find(id(5), std::vector<ChunkId>{id(2), id(3)}, true);
  EXPECT_EQ(h.match, SegmentIndex::Match::Latest);
  EXPECT_EQ(tag(h), 2);
  EXPECT_FALSE(idx.find(id(6), std::vector<ChunkId>{}, false).kv);
  const SegmentIndex::Stats s = idx.stats();
  EXPECT_EQ(s.exact, 2);
  EXPECT_EQ(s.nearest, 1);
  EXPECT_EQ(s.latest, 1);
  EXPECT_EQ(s.lookups, 5);
}

TEST(SegmentIndex, TheSameContextReplacesItsOccurrenceAndAtMostPerSegmentAreKept) {
  SegmentIndex idx({1 << 20, 2});
  idx.insert(id(5), {id(1)}, rows(1));
  idx.insert(id(5), {id(1)}, rows(3));
  EXPECT_EQ(idx.stats().occurrences, 1);
  EXPECT_EQ(tag(idx.find(id(5), std::vector<ChunkId>{id(1)}, false)), 3);
  idx.insert(id(5), {id(2)}, rows(4));
  idx.insert(id(5), {id(3)}, rows(5));  // a third context: the least recently used goes
  EXPECT_EQ(idx.stats().occurrences, 2);
  EXPECT_NE(idx.find(id(5), std::vector<ChunkId>{id(1)}, false).match, SegmentIndex::Match::Exact);
}

TEST(SegmentIndex, TheBudgetEvictsTheLeastRecentlyUsedButNeverRowsAHitHolds) {
  const size_t one = rows(0).bytes() + sizeof(ChunkId);
  SegmentIndex idx({2 * one + one / 2, 4});
  idx.insert(id(1), {id(0)}, rows(1));
  idx.insert(id(2), {id(0)}, rows(2));
  SegmentIndex::Hit held = idx.find(id(1), std::vector<ChunkId>{id(0)}, false);  // id 1 recent
  idx.insert(id(3), {id(0)}, rows(3));  // over budget: id 2, least recently used, goes
  EXPECT_TRUE(idx.contains(id(1)));
  EXPECT_FALSE(idx.contains(id(2)));
  EXPECT_TRUE(idx.contains(id(3)));
  EXPECT_LE(idx.bytes_held(), 2 * one + one / 2);
  idx.shrink_to(0);
  EXPECT_FALSE(idx.contains(id(1)));
  EXPECT_EQ(tag(held), 1);  // the caller's rows outlive their eviction
  EXPECT_EQ(idx.stats().evictions, 3);
  SegmentIndex none({rows(1).bytes() - 1, 4});  // rows larger than the budget are not kept
  none.insert(id(1), {}, rows(1));
  EXPECT_FALSE(none.contains(id(1)));
}
