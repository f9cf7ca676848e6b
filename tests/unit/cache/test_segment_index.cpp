// The segment index (cache/segment_index.h): a segment's conditioned KV found again behind the
// same antecedents (exact), the nearest ones (most shared in order), or the latest; occurrences
// held as pool pages (forks of the computing sequence) under a page budget with LRU eviction that
// never takes a page a caller is served from.
#include <gtest/gtest.h>

#include "cache/segment_index.h"
#include "store/store.h"

using namespace kamera;

namespace {

ChunkId id(uint64_t n) {
  return ChunkId{n, n * 31 + 7};
}

// A pool of one layer, one rope channel of 2 values, pages of 4 tokens.
struct Rig {
  std::unique_ptr<KvPool> pool;
  explicit Rig(int pages = 64) {
    KvPool::Params p;
    p.layout.n_layers = 1;
    p.layout.channels = {{"k", 2, true}};
    p.page_tokens = 4;
    p.n_pages = pages;
    auto r = KvPool::create(p);
    EXPECT_TRUE(r.ok());
    pool = std::move(r).value();
  }
  // A sequence of n tokens whose rows are {tag, token} (n = 4: one page of its own).
  SeqId rows(float tag, int n = 4) {
    const SeqId s = pool->create_sequence();
    std::vector<Pos> pos;
    for (int t = 0; t < n; ++t) pos.push_back(Pos::linear(t));
    EXPECT_TRUE(pool->append(s, pos).ok());
    for (int t = 0; t < n; ++t) {
      const float row[2] = {tag, float(t)};
      pool->write_row(s, 0, 0, t, row);
    }
    return s;
  }
  // Keeps an occurrence of `seg` behind `ante` with rows tagged `tag` (the computing sequence
  // then ends, as a request's does).
  void insert(SegmentIndex& idx, ChunkId seg, std::vector<ChunkId> ante, float tag, int n = 4) {
    const SeqId s = rows(tag, n);
    EXPECT_TRUE(idx.insert(seg, std::move(ante), s, 0, n).ok());
    pool->free_sequence(s);
  }
};

// The tag of a hit's rows (the first value of its first row).
float tag(const Rig& rig, const SegmentIndex::Hit& h) {
  float row[2];
  rig.pool->read_row(h.rows->seq(), 0, 0, 0, row);
  return row[0];
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
  Rig rig;
  SegmentIndex idx(*rig.pool, {64, 4});
  rig.insert(idx, id(5), {id(1), id(2), id(3)}, 1);  // a window o1 o2 o3 before o5
  rig.insert(idx, id(5), {id(9)}, 2);                // another context, more recent
  SegmentIndex::Hit h = idx.find(id(5), std::vector<ChunkId>{id(1), id(2), id(3)}, false);
  ASSERT_TRUE(h.rows);
  EXPECT_EQ(h.match, SegmentIndex::Match::Exact);
  EXPECT_EQ(tag(rig, h), 1);
  // The window slid: o1 left. Nearest is the window it was computed in (2 shared), not the latest.
  h = idx.find(id(5), std::vector<ChunkId>{id(2), id(3)}, false);
  EXPECT_EQ(h.match, SegmentIndex::Match::Nearest);
  EXPECT_EQ(h.shared, 2);
  EXPECT_EQ(tag(rig, h), 1);
  // latest: the most recently used occurrence whatever its antecedents.
  idx.find(id(5), std::vector<ChunkId>{id(9)}, false);
  h = idx.find(id(5), std::vector<ChunkId>{id(2), id(3)}, true);
  EXPECT_EQ(h.match, SegmentIndex::Match::Latest);
  EXPECT_EQ(tag(rig, h), 2);
  EXPECT_FALSE(idx.find(id(6), std::vector<ChunkId>{}, false).rows);
  const SegmentIndex::Stats s = idx.stats();
  EXPECT_EQ(s.exact, 2);
  EXPECT_EQ(s.nearest, 1);
  EXPECT_EQ(s.latest, 1);
  EXPECT_EQ(s.lookups, 5);
}

TEST(SegmentIndex, TheSameContextReplacesItsOccurrenceAndAtMostPerSegmentAreKept) {
  Rig rig;
  SegmentIndex idx(*rig.pool, {64, 2});
  rig.insert(idx, id(5), {id(1)}, 1);
  rig.insert(idx, id(5), {id(1)}, 3);
  EXPECT_EQ(idx.stats().occurrences, 1);
  EXPECT_EQ(tag(rig, idx.find(id(5), std::vector<ChunkId>{id(1)}, false)), 3);
  rig.insert(idx, id(5), {id(2)}, 4);
  rig.insert(idx, id(5), {id(3)}, 5);  // a third context: the least recently used goes
  EXPECT_EQ(idx.stats().occurrences, 2);
  EXPECT_NE(idx.find(id(5), std::vector<ChunkId>{id(1)}, false).match, SegmentIndex::Match::Exact);
}

TEST(SegmentIndex, TheBudgetEvictsTheLeastRecentlyUsedButNeverRowsAHitHolds) {
  Rig rig;
  SegmentIndex idx(*rig.pool, {2, 4});  // two pages: each occurrence holds one
  rig.insert(idx, id(1), {id(0)}, 1);
  rig.insert(idx, id(2), {id(0)}, 2);
  SegmentIndex::Hit held = idx.find(id(1), std::vector<ChunkId>{id(0)}, false);  // id 1 recent
  rig.insert(idx, id(3), {id(0)}, 3);  // over budget: id 2, least recently used, goes
  EXPECT_TRUE(idx.contains(id(1)));
  EXPECT_FALSE(idx.contains(id(2)));
  EXPECT_TRUE(idx.contains(id(3)));
  EXPECT_LE(idx.pages_held(), 2);
  EXPECT_EQ(rig.pool->stats().pages_used, 2);  // the index's pages are all the pool holds
  idx.shrink_to(0);
  EXPECT_FALSE(idx.contains(id(1)));
  EXPECT_EQ(idx.pages_held(), 0);
  EXPECT_EQ(tag(rig, held), 1);  // the caller's rows outlive their eviction
  EXPECT_EQ(rig.pool->stats().pages_used, 1);
  held = {};
  EXPECT_EQ(rig.pool->stats().pages_used, 0);  // the last holder gave the page back
  EXPECT_EQ(idx.stats().evictions, 3);
  SegmentIndex none(*rig.pool, {1, 4});  // rows on more pages than the budget are not kept
  rig.insert(none, id(1), {}, 1, 5);
  EXPECT_FALSE(none.contains(id(1)));
  EXPECT_EQ(rig.pool->stats().pages_used, 0);
  EXPECT_TRUE(rig.pool->check_invariants().ok());
}

// Storing an occurrence shares the computing sequence's pages (no page taken, no row copied);
// the occurrence keeps only the segment's tokens, and serving it copies exactly those rows.
TEST(SegmentIndex, AnOccurrenceIsAForkOfTheComputingPagesAndServesItsOwnRows) {
  Rig rig;
  SegmentIndex idx(*rig.pool, {64, 4});
  const SeqId s = rig.rows(7, 12);  // three pages; the segment is tokens [5, 9)
  const int used = rig.pool->stats().pages_used;
  ASSERT_TRUE(idx.insert(id(1), {}, s, 5, 4).ok());
  EXPECT_EQ(rig.pool->stats().pages_used, used);  // shared, not copied
  EXPECT_EQ(idx.pages_held(), 2);                 // tokens 5..8 lie on pages 1 and 2
  rig.pool->free_sequence(s);
  EXPECT_EQ(rig.pool->stats().pages_used, 2);  // the request's first page went back
  const SegmentIndex::Hit h = idx.find(id(1), std::vector<ChunkId>{}, false);
  ASSERT_TRUE(h.rows);
  EXPECT_EQ(h.rows->n_tokens(), 4);
  const SeqId dst = rig.pool->create_sequence();
  std::vector<Pos> pos;
  for (int t = 0; t < 4; ++t) pos.push_back(Pos::linear(100 + t));
  ASSERT_TRUE(rig.pool->append(dst, pos).ok());
  h.rows->copy_to(dst, 0);
  for (int t = 0; t < 4; ++t) {
    float row[2];
    rig.pool->read_row(dst, 0, 0, t, row);
    EXPECT_EQ(row[0], 7);
    EXPECT_EQ(row[1], 5 + t);
  }
  EXPECT_EQ(rig.pool->positions(dst)[0].t, 100);  // the new position is the new sequence's
  rig.pool->free_sequence(dst);
  EXPECT_TRUE(rig.pool->check_invariants().ok());
}

// An occurrence a request is being served from keeps its pages while eviction runs: the pool
// hands them to no one else, and the rows read afterwards are the rows written.
TEST(SegmentIndex, AnOccurrenceBeingServedKeepsItsPagesThroughEviction) {
  Rig rig(8);
  SegmentIndex idx(*rig.pool, {8, 4});
  rig.insert(idx, id(1), {}, 3, 8);  // two pages
  const SegmentIndex::Hit h = idx.find(id(1), std::vector<ChunkId>{}, false);
  idx.shrink_to(0);  // evicted while the hit is held
  EXPECT_FALSE(idx.contains(id(1)));
  // Every other page of the pool taken and overwritten.
  const int free = rig.pool->n_free_pages();
  EXPECT_EQ(free, 6);
  const SeqId churn = rig.rows(-1, free * 4);
  EXPECT_EQ(rig.pool->n_free_pages(), 0);
  const SeqId dst = rig.pool->create_sequence();
  rig.pool->free_sequence(churn);
  std::vector<Pos> pos;
  for (int t = 0; t < 8; ++t) pos.push_back(Pos::linear(t));
  ASSERT_TRUE(rig.pool->append(dst, pos).ok());
  h.rows->copy_to(dst, 0);
  for (int t = 0; t < 8; ++t) {
    float row[2];
    rig.pool->read_row(dst, 0, 0, t, row);
    EXPECT_EQ(row[0], 3) << "token " << t;
    EXPECT_EQ(row[1], t) << "token " << t;
  }
  rig.pool->free_sequence(dst);
  EXPECT_TRUE(rig.pool->check_invariants().ok());
}

// An occurrence computed behind rows that are not exact (a segment served from another context,
// an approximate prefix) is compacted like any, but its patch is not told to the caller as its
// antecedents' patch (the caller publishes those to the shared tiers, where another server takes
// them as exact).
TEST(SegmentIndex, OnlyExactOccurrencesArePublishedAsTheirContextsPatch) {
  Rig rig;
  SegmentIndex idx(*rig.pool, {64, 4});
  rig.insert(idx, id(1), {id(2)}, 1.0f);  // exact
  const SeqId s = rig.rows(3.0f);
  ASSERT_TRUE(idx.insert(id(1), {id(3)}, s, 0, 4, false).ok());  // behind approximate rows
  rig.pool->free_sequence(s);
  auto canonical = std::make_shared<CanonicalEntry>();
  std::vector<std::vector<ChunkId>> told;
  auto n = idx.compact(
      id(1), canonical, [](const ChunkKV&, const ChunkKV&) -> Result<Patch> { return Patch{}; },
      [&](std::span<const ChunkId> ante, const Patch&) {
        told.emplace_back(ante.begin(), ante.end());
      });
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(*n, 2);  // both keep the (empty) patch: smaller than their rows
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0], std::vector<ChunkId>{id(2)});
}
