// KvPool::rollback: truncating a sequence's tail that also gives the slots back to their page when
// nothing else can hold them (speculative decoding appends a draft and rolls back what the model
// rejected, every step): a sequence that appends and rolls back again and again keeps its pages
// (with truncate() alone, which leaves holes, this test's 1800 slots would take 113 pages), and a
// slot another sequence still reads is never handed out again.
#include <gtest/gtest.h>

#include <vector>

#include "kv/pool.h"

namespace kamera {
namespace {

std::unique_ptr<KvPool> pool(int page_tokens, int n_pages) {
  KvPool::Params p;
  p.layout.n_layers = 1;
  p.layout.channels = {{"k", 4, true}, {"v", 4, false}};
  p.page_tokens = page_tokens;
  p.n_pages = n_pages;
  return std::move(KvPool::create(p)).value();
}

std::vector<Pos> positions(int from, int n) {
  std::vector<Pos> out;
  for (int i = 0; i < n; ++i) out.push_back(Pos::linear(from + i));
  return out;
}

}  // namespace

TEST(KvRollback, AppendAndRollBackAgainAndAgainKeepsThePages) {
  auto kv = pool(16, 64);
  const SeqId s = kv->create_sequence();
  ASSERT_TRUE(kv->append(s, positions(0, 5)).ok());
  const int free_before = kv->n_free_pages();
  // 200 steps of a 9-token draft, one kept each time: 1800 slots appended, 200 kept.
  for (int step = 0; step < 200; ++step) {
    const int n = kv->n_tokens(s);
    ASSERT_TRUE(kv->append(s, positions(n, 9)).ok()) << "step " << step;
    ASSERT_TRUE(kv->rollback(s, n + 1).ok());
  }
  EXPECT_EQ(kv->n_tokens(s), 205);
  // 205 tokens need 13 pages of 16: the pool holds no more than that.
  EXPECT_EQ(free_before - kv->n_free_pages(), 13 - 1);
  EXPECT_TRUE(kv->check_invariants().ok()) << kv->check_invariants().message();
}

// A fork shares the tail page: the fork's rollback must not give back slots the original holds,
// nor the original's the fork's.
TEST(KvRollback, ASlotAnotherSequenceHoldsIsNeverReused) {
  auto kv = pool(16, 16);
  const SeqId a = kv->create_sequence();
  ASSERT_TRUE(kv->append(a, positions(0, 6)).ok());
  const SeqId b = *kv->fork(a);
  const std::vector<int32_t> a_slots(kv->slots(a).begin(), kv->slots(a).end());
  ASSERT_TRUE(kv->rollback(b, 3).ok());  // the page is shared: nothing given back
  ASSERT_TRUE(kv->append(b, positions(3, 4)).ok());
  for (int32_t slot : kv->slots(b).subspan(3))
    EXPECT_EQ(std::count(a_slots.begin(), a_slots.end(), slot), 0) << "slot " << slot;
  ASSERT_TRUE(kv->rollback(a, 2).ok());
  ASSERT_TRUE(kv->append(a, positions(2, 3)).ok());
  const auto bs = kv->slots(b);
  for (int32_t slot : kv->slots(a).subspan(2))
    EXPECT_EQ(std::count(bs.begin(), bs.end(), slot), 0) << "slot " << slot;
  EXPECT_TRUE(kv->check_invariants().ok()) << kv->check_invariants().message();
}

}  // namespace kamera
