// Unit tests of the paged KV pool (src/kv/pool.h): rows, metadata, fork + copy-on-write, full-pool
// failures that leave the pool untouched, erase/truncate, and a seeded random walk against a model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kv/pool.h"

namespace kamera {
namespace {

// 2 layers; channel 0 "k" (width 3, rotated), channel 1 "v" (width 5).
constexpr int kLayers = 2;
constexpr int kChannels = 2;

KvLayout test_layout() {
  KvLayout lay;
  lay.n_layers = kLayers;
  lay.channels = {{"k", 3, true}, {"v", 5, false}};
  return lay;
}

std::unique_ptr<KvPool> make_pool(int page_tokens, int n_pages) {
  KvPool::Params p;
  p.layout = test_layout();
  p.page_tokens = page_tokens;
  p.n_pages = n_pages;
  auto r = KvPool::create(p);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
  return std::move(r).value();
}

int width_of(const KvPool& pool, int channel) {
  return pool.layout().channels[channel].width;
}

// Value of element i of the (layer, channel) row of a token tagged `tag`; exact in f32 while
// tag < 2^18 (tag * 64 + 63 < 2^24).
float pattern(uint32_t tag, int layer, int channel, int i) {
  return static_cast<float>(tag * 64u + static_cast<uint32_t>(layer * 16 + channel * 8 + i));
}

void write_token(KvPool& pool, SeqId seq, int token, uint32_t tag) {
  for (int l = 0; l < kLayers; ++l) {
    for (int c = 0; c < kChannels; ++c) {
      float* r = pool.row(seq, l, c, token);
      for (int i = 0; i < width_of(pool, c); ++i) r[i] = pattern(tag, l, c, i);
    }
  }
}

// True when every row of the token holds the pattern of `tag`.
bool token_is(const KvPool& pool, SeqId seq, int token, uint32_t tag) {
  for (int l = 0; l < kLayers; ++l) {
    for (int c = 0; c < kChannels; ++c) {
      const float* r = pool.row(seq, l, c, token);
      for (int i = 0; i < width_of(pool, c); ++i) {
        if (r[i] != pattern(tag, l, c, i)) return false;
      }
    }
  }
  return true;
}

std::vector<Pos> linear_positions(int from, int n) {
  std::vector<Pos> v;
  for (int i = 0; i < n; ++i) v.push_back(Pos::linear(from + i));
  return v;
}

// Everything observable about a pool: stats, per-page refcounts, sequences and the raw arenas.
struct Snapshot {
  KvPool::Stats stats;
  int free_pages = 0;
  std::vector<int> refcounts;
  std::map<SeqId, std::vector<int32_t>> slots;
  std::map<SeqId, std::vector<Pos>> positions;
  std::vector<std::vector<unsigned char>> arenas;  // raw bytes; unwritten rows may be anything

  static Snapshot take(const KvPool& pool, const std::vector<SeqId>& seqs) {
    Snapshot s;
    s.stats = pool.stats();
    s.free_pages = pool.n_free_pages();
    for (int p = 0; p < pool.n_pages(); ++p) s.refcounts.push_back(pool.page_refcount(p));
    for (SeqId id : seqs) {
      auto sl = pool.slots(id);
      auto ps = pool.positions(id);
      s.slots[id].assign(sl.begin(), sl.end());
      s.positions[id].assign(ps.begin(), ps.end());
    }
    const size_t rows = static_cast<size_t>(pool.n_pages()) * pool.page_tokens();
    for (int l = 0; l < kLayers; ++l) {
      for (int c = 0; c < kChannels; ++c) {
        const size_t bytes = rows * width_of(pool, c) * sizeof(float);
        std::vector<unsigned char> b(bytes);
        std::memcpy(b.data(), pool.arena(l, c), bytes);
        s.arenas.push_back(std::move(b));
      }
    }
    return s;
  }
};

void expect_same(const Snapshot& a, const Snapshot& b) {
  EXPECT_EQ(a.stats.pages_total, b.stats.pages_total);
  EXPECT_EQ(a.stats.pages_used, b.stats.pages_used);
  EXPECT_EQ(a.stats.sequences, b.stats.sequences);
  EXPECT_EQ(a.stats.tokens, b.stats.tokens);
  EXPECT_EQ(a.stats.cow_copies, b.stats.cow_copies);
  EXPECT_EQ(a.free_pages, b.free_pages);
  EXPECT_EQ(a.refcounts, b.refcounts);
  EXPECT_EQ(a.slots, b.slots);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_TRUE(a.arenas == b.arenas) << "arena bytes changed";
}

// ----------------------------------------------------------------------------------------------

TEST(KvPool, LayoutHelpers) {
  KvLayout lay = test_layout();
  EXPECT_EQ(lay.channel_index("k"), 0);
  EXPECT_EQ(lay.channel_index("v"), 1);
  EXPECT_EQ(lay.channel_index("q"), -1);
  EXPECT_EQ(lay.floats_per_token(), size_t{(3 + 5) * 2});
}

TEST(KvPool, CreateRejectsBadParams) {
  auto try_create = [](auto edit) {
    KvPool::Params p;
    p.layout = test_layout();
    p.page_tokens = 4;
    p.n_pages = 8;
    edit(p);
    return KvPool::create(p);
  };
  EXPECT_TRUE(try_create([](KvPool::Params&) {}).ok());
  EXPECT_FALSE(try_create([](KvPool::Params& p) { p.n_pages = 0; }).ok());
  EXPECT_FALSE(try_create([](KvPool::Params& p) { p.page_tokens = 0; }).ok());
  EXPECT_FALSE(try_create([](KvPool::Params& p) { p.page_tokens = -4; }).ok());
  EXPECT_FALSE(try_create([](KvPool::Params& p) { p.layout.n_layers = 0; }).ok());
  EXPECT_FALSE(try_create([](KvPool::Params& p) { p.layout.channels.clear(); }).ok());
  EXPECT_FALSE(try_create([](KvPool::Params& p) { p.layout.channels[1].width = 0; }).ok());
  EXPECT_FALSE(try_create([](KvPool::Params& p) { p.layout.channels[1].name = "k"; }).ok());
  // Slot count beyond int32.
  auto slots = try_create([](KvPool::Params& p) {
    p.n_pages = 1 << 30;
    p.page_tokens = 1 << 10;
  });
  ASSERT_FALSE(slots.ok());
  EXPECT_NE(slots.message().find("slot"), std::string::npos) << slots.message();
  // Absurd byte size (refused before any allocation is attempted).
  auto huge = try_create([](KvPool::Params& p) {
    p.n_pages = 1 << 20;
    p.page_tokens = 1 << 10;
    p.layout.n_layers = 1 << 20;
  });
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.message().find("bytes"), std::string::npos) << huge.message();
}

TEST(KvPool, AppendWriteReadBackAndPositions) {
  auto pool = make_pool(4, 16);
  SeqId s = pool->create_sequence();
  EXPECT_TRUE(pool->has_sequence(s));
  EXPECT_EQ(pool->n_tokens(s), 0);

  auto r = pool->append(s, linear_positions(0, 6));
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, 0);
  auto r2 = pool->append(s, linear_positions(6, 4));
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(*r2, 6);
  ASSERT_EQ(pool->n_tokens(s), 10);
  // 10 tokens in pages of 4: the second append fills the tail page first, so 3 pages.
  EXPECT_EQ(pool->stats().pages_used, 3);
  EXPECT_EQ(pool->stats().tokens, 10);
  ASSERT_TRUE(pool->check_invariants().ok());

  for (int t = 0; t < 10; ++t) write_token(*pool, s, t, 100 + t);
  for (int t = 0; t < 10; ++t) EXPECT_TRUE(token_is(*pool, s, t, 100 + t)) << t;

  // Kernel view agrees with row().
  auto sl = pool->slots(s);
  ASSERT_EQ(sl.size(), 10u);
  for (int t = 0; t < 10; ++t) {
    for (int c = 0; c < kChannels; ++c) {
      EXPECT_EQ(pool->arena(1, c) + static_cast<size_t>(sl[t]) * width_of(*pool, c),
                pool->row(s, 1, c, t));
    }
  }

  auto ps = pool->positions(s);
  for (int t = 0; t < 10; ++t) EXPECT_EQ(ps[t], Pos::linear(t));

  // set_position is metadata only.
  auto before = Snapshot::take(*pool, {s});
  pool->set_position(s, 3, Pos{40, 41, 42});
  pool->set_position(s, 9, Pos::linear(7).shifted(100));
  EXPECT_EQ(pool->positions(s)[3], (Pos{40, 41, 42}));
  EXPECT_EQ(pool->positions(s)[9], Pos::linear(107));
  EXPECT_EQ(pool->positions(s)[4], Pos::linear(4));
  auto after = Snapshot::take(*pool, {s});
  EXPECT_TRUE(before.arenas == after.arenas);
  EXPECT_EQ(before.slots, after.slots);
  for (int t = 0; t < 10; ++t) EXPECT_TRUE(token_is(*pool, s, t, 100 + t));

  pool->free_sequence(s);
  EXPECT_FALSE(pool->has_sequence(s));
  EXPECT_EQ(pool->n_free_pages(), 16);
  EXPECT_TRUE(pool->check_invariants().ok());
  // Ids are not reused.
  SeqId s2 = pool->create_sequence();
  EXPECT_NE(s2, s);
}

TEST(KvPool, TailPageReuseAndHolesNotReused) {
  auto pool = make_pool(4, 8);
  SeqId s = pool->create_sequence();
  for (int t = 0; t < 3; ++t) ASSERT_TRUE(pool->append(s, linear_positions(t, 1)).ok());
  EXPECT_EQ(pool->stats().pages_used, 1);
  auto sl = pool->slots(s);
  EXPECT_EQ(sl[1], sl[0] + 1);
  EXPECT_EQ(sl[2], sl[0] + 2);
  // Erasing the last token leaves a hole: the next append goes after it.
  ASSERT_TRUE(pool->truncate(s, 2).ok());
  ASSERT_TRUE(pool->append(s, linear_positions(2, 1)).ok());
  EXPECT_EQ(pool->slots(s)[2], pool->slots(s)[0] + 3);
  EXPECT_EQ(pool->stats().pages_used, 1);
  // The page is full now: the next token opens a fresh page.
  ASSERT_TRUE(pool->append(s, linear_positions(3, 1)).ok());
  EXPECT_EQ(pool->stats().pages_used, 2);
  // Inserting in the middle uses a fresh page even though the tail page has room.
  ASSERT_TRUE(pool->insert(s, 1, linear_positions(50, 1)).ok());
  EXPECT_EQ(pool->stats().pages_used, 3);
  EXPECT_EQ(pool->positions(s)[1], Pos::linear(50));
  EXPECT_TRUE(pool->check_invariants().ok());
  // Erasing everything returns all pages.
  ASSERT_TRUE(pool->erase(s, 0, pool->n_tokens(s)).ok());
  EXPECT_EQ(pool->stats().pages_used, 0);
  EXPECT_EQ(pool->n_free_pages(), 8);
  EXPECT_TRUE(pool->check_invariants().ok());
}

TEST(KvPool, ForkSharesPagesAndCopiesOnWrite) {
  auto pool = make_pool(4, 16);
  SeqId parent = pool->create_sequence();
  ASSERT_TRUE(pool->append(parent, linear_positions(0, 10)).ok());
  for (int t = 0; t < 10; ++t) write_token(*pool, parent, t, t);

  auto f = pool->fork(parent);
  ASSERT_TRUE(f.ok()) << f.message();
  SeqId child = *f;
  EXPECT_NE(child, parent);
  EXPECT_EQ(pool->n_tokens(child), 10);
  EXPECT_TRUE(std::ranges::equal(pool->slots(child), pool->slots(parent)));
  EXPECT_TRUE(std::ranges::equal(pool->positions(child), pool->positions(parent)));
  EXPECT_EQ(pool->stats().pages_used, 3);  // shared, nothing copied
  EXPECT_EQ(pool->stats().tokens, 20);
  for (int t = 0; t < 10; ++t) {
    EXPECT_EQ(pool->page_refcount(pool->slots(parent)[t] / 4), 2);
    EXPECT_TRUE(token_is(*pool, child, t, t));
  }
  ASSERT_TRUE(pool->check_invariants().ok());

  // Child writes token 5 (page 1 of the sequence): exactly one page copied.
  ASSERT_TRUE(pool->make_writable(child, 5, 6).ok());
  EXPECT_EQ(pool->stats().cow_copies, 1);
  EXPECT_EQ(pool->stats().pages_used, 4);
  const int old_page = pool->slots(parent)[5] / 4;
  const int new_page = pool->slots(child)[5] / 4;
  EXPECT_NE(old_page, new_page);
  EXPECT_EQ(pool->page_refcount(old_page), 1);
  EXPECT_EQ(pool->page_refcount(new_page), 1);
  // All of the child's tokens of that page moved, at the same offsets; others stay shared.
  for (int t = 4; t < 8; ++t) {
    EXPECT_EQ(pool->slots(child)[t] / 4, new_page);
    EXPECT_EQ(pool->slots(child)[t] % 4, pool->slots(parent)[t] % 4);
    EXPECT_TRUE(token_is(*pool, child, t, t));  // bytes copied
  }
  EXPECT_EQ(pool->slots(child)[0], pool->slots(parent)[0]);
  EXPECT_EQ(pool->slots(child)[9], pool->slots(parent)[9]);
  write_token(*pool, child, 5, 1000);
  EXPECT_TRUE(token_is(*pool, child, 5, 1000));
  EXPECT_TRUE(token_is(*pool, parent, 5, 5));  // parent unchanged
  ASSERT_TRUE(pool->check_invariants().ok());

  // Parent writes token 5: its page is exclusive now, no copy needed.
  ASSERT_TRUE(pool->make_writable(parent, 5, 6).ok());
  EXPECT_EQ(pool->stats().cow_copies, 1);
  write_token(*pool, parent, 5, 2000);
  EXPECT_TRUE(token_is(*pool, child, 5, 1000));

  // Parent writes token 0 (shared page): copied for the parent, child unchanged.
  ASSERT_TRUE(pool->make_writable(parent, 0, 1).ok());
  EXPECT_EQ(pool->stats().cow_copies, 2);
  write_token(*pool, parent, 0, 3000);
  EXPECT_TRUE(token_is(*pool, child, 0, 0));
  EXPECT_TRUE(token_is(*pool, parent, 0, 3000));

  // make_writable over everything copies only the remaining shared page (tokens 8, 9).
  ASSERT_TRUE(pool->make_writable(child, 0, 10).ok());
  EXPECT_EQ(pool->stats().cow_copies, 3);
  for (int t = 0; t < 10; ++t) EXPECT_EQ(pool->page_refcount(pool->slots(child)[t] / 4), 1);
  ASSERT_TRUE(pool->check_invariants().ok());

  pool->free_sequence(parent);
  for (int t = 0; t < 10; ++t) {
    EXPECT_TRUE(token_is(*pool, child, t, t == 5 ? 1000 : t)) << t;
  }
  pool->free_sequence(child);
  EXPECT_EQ(pool->n_free_pages(), 16);
  EXPECT_TRUE(pool->check_invariants().ok());
}

TEST(KvPool, AppendToParentAfterForkLeavesChildIntact) {
  auto pool = make_pool(4, 16);
  SeqId parent = pool->create_sequence();
  ASSERT_TRUE(pool->append(parent, linear_positions(0, 6)).ok());  // tail page half full
  for (int t = 0; t < 6; ++t) write_token(*pool, parent, t, t);
  SeqId child = *pool->fork(parent);

  // Shared tail page: the append must not land in it.
  ASSERT_TRUE(pool->append(parent, linear_positions(6, 3)).ok());
  for (int t = 6; t < 9; ++t) write_token(*pool, parent, t, 50 + t);
  EXPECT_EQ(pool->stats().cow_copies, 0);
  EXPECT_NE(pool->slots(parent)[6] / 4, pool->slots(parent)[5] / 4);
  EXPECT_EQ(pool->n_tokens(child), 6);
  for (int t = 0; t < 6; ++t) EXPECT_TRUE(token_is(*pool, child, t, t));

  // The child appends as well; both continue independently.
  ASSERT_TRUE(pool->append(child, linear_positions(6, 2)).ok());
  for (int t = 6; t < 8; ++t) write_token(*pool, child, t, 90 + t);
  for (int t = 6; t < 9; ++t) EXPECT_TRUE(token_is(*pool, parent, t, 50 + t));
  for (int t = 6; t < 8; ++t) EXPECT_TRUE(token_is(*pool, child, t, 90 + t));
  EXPECT_TRUE(pool->check_invariants().ok());

  // Once the child is gone the parent's old tail page is exclusive again.
  pool->free_sequence(child);
  EXPECT_EQ(pool->page_refcount(pool->slots(parent)[5] / 4), 1);
  for (int t = 0; t < 6; ++t) EXPECT_TRUE(token_is(*pool, parent, t, t));
  EXPECT_TRUE(pool->check_invariants().ok());
}

TEST(KvPool, FullPoolInsertFailsWithoutChange) {
  auto pool = make_pool(4, 4);  // 16 slots
  SeqId a = pool->create_sequence();
  ASSERT_TRUE(pool->append(a, linear_positions(0, 6)).ok());  // 2 pages, 2 free slots in tail
  for (int t = 0; t < 6; ++t) write_token(*pool, a, t, t);
  SeqId b = *pool->fork(a);
  SeqId c = pool->create_sequence();
  ASSERT_TRUE(pool->append(c, linear_positions(0, 3)).ok());  // 1 page, 1 free slot
  for (int t = 0; t < 3; ++t) write_token(*pool, c, t, 10 + t);
  ASSERT_EQ(pool->n_free_pages(), 1);

  const std::vector<SeqId> all = {a, b, c};
  auto before = Snapshot::take(*pool, all);
  // 6 tokens need 2 fresh pages (the shared tail page of `a` cannot take any).
  auto r = pool->append(a, linear_positions(6, 6));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message().find("full"), std::string::npos) << r.message();
  expect_same(before, Snapshot::take(*pool, all));
  // 1 tail slot + 4 in the free page = 5: 6 do not fit.
  EXPECT_FALSE(pool->append(c, linear_positions(3, 6)).ok());
  expect_same(before, Snapshot::take(*pool, all));
  // Inserting in front never uses the tail page: 5 tokens need 2 pages.
  EXPECT_FALSE(pool->insert(c, 0, linear_positions(0, 5)).ok());
  expect_same(before, Snapshot::take(*pool, all));
  EXPECT_TRUE(pool->check_invariants().ok());

  // The boundary case fits exactly: 1 tail slot + a fresh page.
  ASSERT_TRUE(pool->append(c, linear_positions(3, 5)).ok());
  EXPECT_EQ(pool->n_free_pages(), 0);
  EXPECT_TRUE(pool->check_invariants().ok());
  for (int t = 0; t < 3; ++t) EXPECT_TRUE(token_is(*pool, c, t, 10 + t));
  for (int t = 0; t < 6; ++t) EXPECT_TRUE(token_is(*pool, b, t, t));
}

TEST(KvPool, FullPoolMakeWritableFailsWithoutChange) {
  auto pool = make_pool(4, 5);
  SeqId a = pool->create_sequence();
  ASSERT_TRUE(pool->append(a, linear_positions(0, 12)).ok());  // 3 pages
  for (int t = 0; t < 12; ++t) write_token(*pool, a, t, t);
  SeqId b = *pool->fork(a);
  ASSERT_EQ(pool->n_free_pages(), 2);

  const std::vector<SeqId> all = {a, b};
  auto before = Snapshot::take(*pool, all);
  auto st = pool->make_writable(b, 0, 12);  // 3 shared pages, 2 free
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("full"), std::string::npos) << st.message();
  expect_same(before, Snapshot::take(*pool, all));
  EXPECT_TRUE(pool->check_invariants().ok());

  // Two pages fit; then the last one does not.
  ASSERT_TRUE(pool->make_writable(b, 2, 8).ok());
  EXPECT_EQ(pool->stats().cow_copies, 2);
  EXPECT_EQ(pool->n_free_pages(), 0);
  auto mid = Snapshot::take(*pool, all);
  EXPECT_FALSE(pool->make_writable(b, 7, 9).ok());
  expect_same(mid, Snapshot::take(*pool, all));
  // A range inside already exclusive pages needs nothing.
  EXPECT_TRUE(pool->make_writable(b, 4, 8).ok());
  EXPECT_TRUE(pool->make_writable(b, 3, 3).ok());  // empty range
  expect_same(mid, Snapshot::take(*pool, all));
  for (int t = 0; t < 12; ++t) {
    EXPECT_TRUE(token_is(*pool, a, t, t));
    EXPECT_TRUE(token_is(*pool, b, t, t));
  }
  EXPECT_TRUE(pool->check_invariants().ok());
}

TEST(KvPool, EraseMiddleFrontAndTruncate) {
  auto pool = make_pool(4, 16);
  SeqId s = pool->create_sequence();
  ASSERT_TRUE(pool->append(s, linear_positions(0, 20)).ok());  // 5 pages
  std::vector<uint32_t> tags;
  std::vector<Pos> pos;
  for (int t = 0; t < 20; ++t) {
    write_token(*pool, s, t, 500 + t);
    tags.push_back(500 + t);
    pos.push_back(Pos::linear(t));
  }
  auto expect_model = [&] {
    ASSERT_EQ(pool->n_tokens(s), static_cast<int>(tags.size()));
    for (size_t t = 0; t < tags.size(); ++t) {
      EXPECT_TRUE(token_is(*pool, s, static_cast<int>(t), tags[t])) << t;
      EXPECT_EQ(pool->positions(s)[t], pos[t]) << t;
    }
    EXPECT_TRUE(pool->check_invariants().ok());
  };

  // Middle: tokens 6..13 cover all of page 2 (tokens 8..11): that page goes back.
  ASSERT_TRUE(pool->erase(s, 6, 14).ok());
  tags.erase(tags.begin() + 6, tags.begin() + 14);
  pos.erase(pos.begin() + 6, pos.begin() + 14);
  EXPECT_EQ(pool->stats().pages_used, 4);
  expect_model();

  // Front.
  ASSERT_TRUE(pool->erase(s, 0, 3).ok());
  tags.erase(tags.begin(), tags.begin() + 3);
  pos.erase(pos.begin(), pos.begin() + 3);
  EXPECT_EQ(pool->stats().pages_used, 4);  // token 3 still holds page 0
  expect_model();
  ASSERT_TRUE(pool->erase(s, 0, 1).ok());
  tags.erase(tags.begin());
  pos.erase(pos.begin());
  EXPECT_EQ(pool->stats().pages_used, 3);
  expect_model();

  // Empty erase is a no-op.
  ASSERT_TRUE(pool->erase(s, 2, 2).ok());
  expect_model();

  // Truncate the tail.
  ASSERT_TRUE(pool->truncate(s, 3).ok());
  tags.resize(3);
  pos.resize(3);
  expect_model();
  EXPECT_EQ(pool->stats().tokens, 3);
  ASSERT_TRUE(pool->truncate(s, 3).ok());  // no-op
  expect_model();

  // Erase on a forked sequence keeps the other sequence's references.
  SeqId f = *pool->fork(s);
  ASSERT_TRUE(pool->erase(f, 0, 3).ok());
  EXPECT_EQ(pool->n_tokens(f), 0);
  expect_model();
  for (int t = 0; t < 3; ++t) EXPECT_EQ(pool->page_refcount(pool->slots(s)[t] / 4), 1);

  ASSERT_TRUE(pool->truncate(s, 0).ok());
  EXPECT_EQ(pool->stats().pages_used, 0);
  EXPECT_TRUE(pool->check_invariants().ok());
}

TEST(KvPool, BadArgumentsReturnErrors) {
  auto pool = make_pool(4, 8);
  SeqId s = pool->create_sequence();
  ASSERT_TRUE(pool->append(s, linear_positions(0, 5)).ok());
  const SeqId bad = 12345;
  EXPECT_FALSE(pool->has_sequence(bad));
  EXPECT_FALSE(pool->fork(bad).ok());
  EXPECT_FALSE(pool->insert(bad, 0, linear_positions(0, 1)).ok());
  EXPECT_FALSE(pool->erase(bad, 0, 0).ok());
  EXPECT_FALSE(pool->truncate(bad, 0).ok());
  EXPECT_FALSE(pool->make_writable(bad, 0, 0).ok());

  auto before = Snapshot::take(*pool, {s});
  EXPECT_FALSE(pool->insert(s, -1, linear_positions(0, 1)).ok());
  EXPECT_FALSE(pool->insert(s, 6, linear_positions(0, 1)).ok());
  EXPECT_FALSE(pool->erase(s, -1, 2).ok());
  EXPECT_FALSE(pool->erase(s, 3, 2).ok());
  EXPECT_FALSE(pool->erase(s, 0, 6).ok());
  EXPECT_FALSE(pool->truncate(s, 6).ok());
  EXPECT_FALSE(pool->truncate(s, -1).ok());
  EXPECT_FALSE(pool->make_writable(s, 0, 6).ok());
  EXPECT_FALSE(pool->make_writable(s, 4, 3).ok());
  expect_same(before, Snapshot::take(*pool, {s}));

  // Inserting nothing is fine anywhere in range.
  auto r = pool->insert(s, 2, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);
  expect_same(before, Snapshot::take(*pool, {s}));

  // A freed id stays invalid; new ids are fresh.
  SeqId t = pool->create_sequence();
  pool->free_sequence(t);
  EXPECT_FALSE(pool->fork(t).ok());
  EXPECT_NE(pool->create_sequence(), t);
  EXPECT_TRUE(pool->check_invariants().ok());
}

TEST(KvPoolDeathTest, MisuseAsserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto pool = make_pool(4, 8);
  SeqId s = pool->create_sequence();
  ASSERT_TRUE(pool->append(s, linear_positions(0, 3)).ok());
  SeqId f = *pool->fork(s);
  EXPECT_DEATH(pool->row(f, 0, 0, 0), "invariant");  // shared page, mutable row
  EXPECT_DEATH(pool->row(s, 0, 0, 0), "invariant");
  const KvPool& cpool = *pool;
  EXPECT_NE(cpool.row(f, 0, 0, 0), nullptr);  // reading a shared page is fine
  EXPECT_DEATH((void)cpool.row(s, 0, 0, 3), "invariant");
  EXPECT_DEATH((void)cpool.row(s, 2, 0, 0), "invariant");
  EXPECT_DEATH((void)cpool.row(s, 0, 2, 0), "invariant");
  EXPECT_DEATH((void)pool->n_tokens(999), "invariant");
  EXPECT_DEATH((void)pool->slots(999), "invariant");
  EXPECT_DEATH((void)pool->positions(999), "invariant");
  EXPECT_DEATH(pool->set_position(s, 3, Pos{}), "invariant");
  EXPECT_DEATH(pool->free_sequence(999), "invariant");
}

// ----------------------------------------------------------------------------------------------
// Randomized walk against a model: per sequence the expected tag of every token (row contents are
// pattern(tag, layer, channel, i)) and its position.

TEST(KvPool, RandomizedAgainstModel) {
  constexpr int kPageTokens = 4;
  constexpr int kPages = 64;
  constexpr int kOps = 20000;
  constexpr int kMaxSeqs = 8;
  auto pool = make_pool(kPageTokens, kPages);
  std::mt19937 rng(20240611);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto random_pos = [&] { return Pos{uniform(-50, 5000), uniform(0, 100), uniform(0, 100)}; };

  struct Model {
    std::vector<uint32_t> tags;
    std::vector<Pos> pos;
  };
  std::map<SeqId, Model> model;
  uint32_t next_tag = 1;
  std::set<SeqId> ever;  // every id handed out (ids must be unique)

  auto ids = [&] {
    std::vector<SeqId> v;
    for (const auto& [id, m] : model) v.push_back(id);
    return v;
  };
  auto pick = [&]() -> SeqId {
    auto it = model.begin();
    std::advance(it, uniform(0, static_cast<int>(model.size()) - 1));
    return it->first;
  };
  auto random_range = [&](int n, int max_len) {
    const int b = uniform(0, n);
    const int e = std::min(n, b + uniform(0, max_len));
    return std::pair<int, int>{b, e};
  };
  auto verify_bytes = [&] {
    for (const auto& [id, m] : model) {
      for (size_t t = 0; t < m.tags.size(); ++t) {
        if (!token_is(*pool, id, static_cast<int>(t), m.tags[t])) {
          ADD_FAILURE() << "sequence " << id << " token " << t << " tag " << m.tags[t];
          return false;
        }
      }
    }
    return true;
  };

  int64_t n_failures = 0, n_insert_fail = 0, n_cow_fail = 0, n_inserted = 0, n_forks = 0;
  int64_t n_erased = 0, n_frees = 0, n_written = 0;
  for (int op = 0; op < kOps; ++op) {
    const int kind = uniform(0, 99);
    const std::vector<SeqId> before_ids = ids();
    if (model.empty() || (kind < 4 && static_cast<int>(model.size()) < kMaxSeqs)) {
      SeqId id = pool->create_sequence();
      ASSERT_TRUE(ever.insert(id).second) << "id reused: " << id;
      model[id] = {};
    } else if (kind < 10) {  // fork
      if (static_cast<int>(model.size()) >= kMaxSeqs) continue;
      SeqId src = pick();
      auto r = pool->fork(src);
      ASSERT_TRUE(r.ok()) << r.message();
      ASSERT_TRUE(ever.insert(*r).second) << "id reused: " << *r;
      model[*r] = model[src];
      ++n_forks;
    } else if (kind < 45) {  // insert (mostly appends)
      SeqId id = pick();
      Model& m = model[id];
      const int n = static_cast<int>(m.tags.size());
      const int at = uniform(0, 9) < 6 ? n : uniform(0, n);
      const int count = uniform(0, 9) == 0 ? uniform(10, 24) : uniform(1, 6);
      std::vector<Pos> ps;
      for (int i = 0; i < count; ++i) ps.push_back(random_pos());
      auto snap = Snapshot::take(*pool, before_ids);
      auto r = pool->insert(id, at, ps);
      if (!r.ok()) {
        ++n_failures;
        ++n_insert_fail;
        // It must only fail when the free pages cannot hold the tokens on their own.
        ASSERT_LT(pool->n_free_pages() * kPageTokens, count);
        expect_same(snap, Snapshot::take(*pool, before_ids));
      } else {
        ASSERT_EQ(*r, at);
        const int fresh = (count + kPageTokens - 1) / kPageTokens;
        const int used = pool->stats().pages_used - snap.stats.pages_used;
        if (at < n || n == 0) {
          ASSERT_EQ(used, fresh);
        } else {
          ASSERT_LE(used, fresh);
        }
        std::vector<uint32_t> new_tags;
        for (int i = 0; i < count; ++i) {
          ASSERT_EQ(pool->page_refcount(pool->slots(id)[at + i] / kPageTokens), 1);
          write_token(*pool, id, at + i, next_tag);
          new_tags.push_back(next_tag++);
        }
        m.tags.insert(m.tags.begin() + at, new_tags.begin(), new_tags.end());
        m.pos.insert(m.pos.begin() + at, ps.begin(), ps.end());
        n_inserted += count;
      }
    } else if (kind < 55) {  // erase a range
      SeqId id = pick();
      Model& m = model[id];
      auto [b, e] = random_range(static_cast<int>(m.tags.size()), 8);
      ASSERT_TRUE(pool->erase(id, b, e).ok());
      m.tags.erase(m.tags.begin() + b, m.tags.begin() + e);
      m.pos.erase(m.pos.begin() + b, m.pos.begin() + e);
      n_erased += e - b;
    } else if (kind < 60) {  // truncate
      SeqId id = pick();
      Model& m = model[id];
      const int n = static_cast<int>(m.tags.size());
      const int keep = uniform(std::max(0, n - 10), n);
      ASSERT_TRUE(pool->truncate(id, keep).ok());
      m.tags.resize(keep);
      m.pos.resize(keep);
      n_erased += n - keep;
    } else if (kind < 85) {  // make_writable + write
      SeqId id = pick();
      Model& m = model[id];
      auto [b, e] = random_range(static_cast<int>(m.tags.size()), 12);
      std::set<int> shared;
      for (int t = b; t < e; ++t) {
        const int page = pool->slots(id)[t] / kPageTokens;
        if (pool->page_refcount(page) > 1) shared.insert(page);
      }
      auto snap = Snapshot::take(*pool, before_ids);
      Status st = pool->make_writable(id, b, e);
      ASSERT_EQ(st.ok(), static_cast<int>(shared.size()) <= snap.free_pages) << st.message();
      if (!st.ok()) {
        ++n_failures;
        ++n_cow_fail;
        expect_same(snap, Snapshot::take(*pool, before_ids));
      } else {
        ASSERT_EQ(pool->stats().cow_copies - snap.stats.cow_copies,
                  static_cast<int64_t>(shared.size()));
        for (int t = b; t < e; ++t) {
          ASSERT_EQ(pool->page_refcount(pool->slots(id)[t] / kPageTokens), 1);
          if (uniform(0, 1) == 0) continue;  // leave some tokens as they were
          write_token(*pool, id, t, next_tag);
          m.tags[t] = next_tag++;
          ++n_written;
        }
      }
    } else if (kind < 93) {  // set_position
      SeqId id = pick();
      Model& m = model[id];
      if (m.tags.empty()) continue;
      const int t = uniform(0, static_cast<int>(m.tags.size()) - 1);
      const Pos p = random_pos();
      pool->set_position(id, t, p);
      m.pos[t] = p;
    } else {  // free
      SeqId id = pick();
      pool->free_sequence(id);
      model.erase(id);
      ++n_frees;
    }

    Status inv = pool->check_invariants();
    ASSERT_TRUE(inv.ok()) << "op " << op << ": " << inv.message();
    ASSERT_EQ(pool->stats().sequences, static_cast<int>(model.size()));
    int64_t tokens = 0;
    for (const auto& [id, m] : model) {
      ASSERT_EQ(pool->n_tokens(id), static_cast<int>(m.tags.size()));
      ASSERT_TRUE(std::ranges::equal(pool->positions(id), m.pos)) << "op " << op;
      tokens += static_cast<int64_t>(m.tags.size());
    }
    ASSERT_EQ(pool->stats().tokens, tokens);
    if (op % 50 == 0) {
      ASSERT_TRUE(verify_bytes()) << "op " << op;
    }
  }
  ASSERT_TRUE(verify_bytes());
  ASSERT_LT(next_tag, 1u << 18);

  const int64_t cow = pool->stats().cow_copies;
  std::printf(
      "[ kv pool ] %d ops: %lld failures (%lld insert, %lld make_writable), %lld cow copies, "
      "%lld tokens inserted, %lld rows written, %lld erased, %lld forks, %lld frees\n",
      kOps, static_cast<long long>(n_failures), static_cast<long long>(n_insert_fail),
      static_cast<long long>(n_cow_fail), static_cast<long long>(cow),
      static_cast<long long>(n_inserted), static_cast<long long>(n_written),
      static_cast<long long>(n_erased), static_cast<long long>(n_forks),
      static_cast<long long>(n_frees));
  // The walk must have exercised the interesting paths (a stub cannot pass).
  EXPECT_GT(n_insert_fail, 50);
  EXPECT_GT(n_cow_fail, 20);
  EXPECT_GT(cow, 200);
  EXPECT_GT(n_inserted, 10000);

  for (SeqId id : ids()) pool->free_sequence(id);
  EXPECT_EQ(pool->n_free_pages(), kPages);
  EXPECT_EQ(pool->stats().pages_used, 0);
  EXPECT_EQ(pool->stats().tokens, 0);
  EXPECT_EQ(pool->stats().sequences, 0);
  for (int p = 0; p < kPages; ++p) EXPECT_EQ(pool->page_refcount(p), 0);
  EXPECT_TRUE(pool->check_invariants().ok());
}

}  // namespace
}  // namespace kamera
