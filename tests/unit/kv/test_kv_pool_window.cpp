// The KV pool's window layers (src/kv/pool.h, "Window layers"): a bounded pool keeps the
// sliding-window layers' rows in a page space of their own whose size is the window's, not the
// context's; rows are given to tokens before they run and given back once the window passed
// them, pages are shared by forks and copied on write as the main ones, and a full window space
// is a clean failure.
#include <gtest/gtest.h>

#include <vector>

#include "kv/pool.h"

namespace kamera {
namespace {

// 2 layers: layer 0 a window layer, layer 1 a full one; channels "k" (3, rope) and "v" (5).
KvPool::Params params(int page_tokens, int n_pages, int64_t window_tokens) {
  KvPool::Params p;
  p.layout.n_layers = 2;
  p.layout.channels = {{"k", 3, true}, {"v", 5, false}};
  p.page_tokens = page_tokens;
  p.n_pages = n_pages;
  p.window_layers = {true, false};
  p.window_tokens = window_tokens;
  return p;
}

std::unique_ptr<KvPool> make(const KvPool::Params& p) {
  auto r = KvPool::create(p);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
  return std::move(r).value();
}

float tag_of(int token, int layer, int ch, int i) {
  return float(token * 64 + layer * 16 + ch * 8 + i);
}

void write_window_rows(KvPool& pool, SeqId s, int token) {
  for (int ch = 0; ch < 2; ++ch) {
    float* r = pool.row(s, 0, ch, token);
    for (int i = 0; i < pool.layout().channels[size_t(ch)].width; ++i)
      r[i] = tag_of(token, 0, ch, i);
  }
}

bool window_rows_hold(const KvPool& pool, SeqId s, int token) {
  for (int ch = 0; ch < 2; ++ch) {
    const float* r = pool.row(s, 0, ch, token);
    for (int i = 0; i < pool.layout().channels[size_t(ch)].width; ++i)
      if (r[i] != tag_of(token, 0, ch, i)) return false;
  }
  return true;
}

std::vector<Pos> positions(int begin, int n) {
  std::vector<Pos> p;
  for (int i = 0; i < n; ++i) p.push_back(Pos::linear(begin + i));
  return p;
}

// The window layer's arena is sized by window_tokens; a sequence of 800 tokens run 8 at a time,
// dropping what a window of 16 passed, never holds more than 4 window pages (16 + 8 rows and two
// partial pages) while the full layer holds all 800; the kept rows keep their values.
TEST(KvPoolWindow, WindowLayersHoldOnlyTheWindow) {
  const int page = 8, W = 16, n_steps = 100, step = 8;
  auto full = make(params(page, n_steps + 4, 0));
  auto pool = make(params(page, n_steps + 4, 4 * page));
  ASSERT_TRUE(pool->bounded_window());
  EXPECT_FALSE(full->bounded_window());
  const size_t row_bytes = (3 + 5) * sizeof(float);
  EXPECT_EQ(full->arena_bytes(), 2 * size_t(n_steps + 4) * page * row_bytes);
  EXPECT_EQ(pool->arena_bytes(), size_t(n_steps + 4 + 4) * page * row_bytes);
  const SeqId s = pool->create_sequence();
  int max_pages = 0;
  for (int k = 0; k < n_steps; ++k) {
    const int first = k * step;
    ASSERT_TRUE(pool->append(s, positions(first, step), false, /*window_rows=*/false).ok());
    pool->drop_window_rows(s, first - W + 1, first);
    ASSERT_TRUE(pool->add_window_rows(s, first, first + step).ok());
    for (int t = first; t < first + step; ++t) write_window_rows(*pool, s, t);
    max_pages = std::max(max_pages, pool->stats().window_pages_used);
    ASSERT_TRUE(pool->check_invariants().ok()) << pool->check_invariants().message();
    EXPECT_EQ(pool->missing_window_row(s, first - W + 1, first + step), -1);
  }
  EXPECT_LE(max_pages, 4);
  EXPECT_EQ(pool->n_tokens(s), n_steps * step);
  EXPECT_EQ(pool->n_window_rows(s), W - 1 + step);
  for (int t = n_steps * step - (W - 1 + step); t < n_steps * step; ++t)
    EXPECT_TRUE(window_rows_hold(*pool, s, t)) << t;
  EXPECT_FALSE(pool->has_window_row(s, 0));
  EXPECT_EQ(pool->missing_window_row(s, 0, pool->n_tokens(s)), 0);  // token 0 was dropped
  pool->free_sequence(s);
  EXPECT_EQ(pool->n_free_window_pages(), pool->n_window_pages());
  EXPECT_TRUE(pool->check_invariants().ok());
}

// A fork shares the window pages: the source dropping its rows leaves the fork's, and writing
// the fork's rows copies the shared pages first.
TEST(KvPoolWindow, ForksShareWindowPagesCopyOnWrite) {
  auto pool = make(params(4, 16, 32));
  const SeqId a = pool->create_sequence();
  ASSERT_TRUE(pool->append(a, positions(0, 10)).ok());  // rows given at insert
  for (int t = 0; t < 10; ++t) write_window_rows(*pool, a, t);
  const SeqId b = *pool->fork(a);
  EXPECT_EQ(pool->drop_window_rows(a, 8, 10), 8);
  ASSERT_TRUE(pool->check_invariants().ok()) << pool->check_invariants().message();
  for (int t = 0; t < 10; ++t) EXPECT_TRUE(window_rows_hold(*pool, b, t)) << t;
  const int64_t cow = pool->stats().cow_copies;
  ASSERT_TRUE(pool->make_writable(b, 8, 10).ok());
  EXPECT_GT(pool->stats().cow_copies, cow);
  write_window_rows(*pool, b, 9);  // asserts the page is b's alone
  for (int t = 8; t < 10; ++t) EXPECT_TRUE(window_rows_hold(*pool, a, t)) << t;
  ASSERT_TRUE(pool->check_invariants().ok()) << pool->check_invariants().message();
  pool->free_sequence(a);
  pool->free_sequence(b);
  EXPECT_EQ(pool->n_free_window_pages(), pool->n_window_pages());
  EXPECT_EQ(pool->n_free_pages(), pool->n_pages());
}

// More window rows than the window space holds: OutOfMemory, nothing changed.
TEST(KvPoolWindow, FullWindowSpaceFailsCleanly) {
  auto pool = make(params(4, 16, 8));
  const SeqId s = pool->create_sequence();
  ASSERT_TRUE(pool->append(s, positions(0, 12), false, false).ok());
  ASSERT_TRUE(pool->add_window_rows(s, 0, 6).ok());
  const Status st = pool->add_window_rows(s, 6, 12);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::OutOfMemory);
  EXPECT_EQ(pool->n_window_rows(s), 6);
  auto ins = pool->append(s, positions(12, 8));  // with rows: 8 more do not fit either
  EXPECT_FALSE(ins.ok());
  EXPECT_EQ(pool->n_tokens(s), 12);
  EXPECT_TRUE(pool->check_invariants().ok()) << pool->check_invariants().message();
  pool->drop_window_rows(s, 4, 12);
  EXPECT_TRUE(pool->add_window_rows(s, 6, 12).ok());  // the dropped pages came back
  EXPECT_TRUE(pool->check_invariants().ok()) << pool->check_invariants().message();
}

}  // namespace
}  // namespace kamera
