// Placement traces and policies (bench/placement_trace.h): the traces have the shape they claim,
// and the policies' orders have the properties the placement bench relies on.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "bench/placement_trace.h"

using namespace kamera;

namespace {

// Ordered prefixes a policy serves over a trace that it had not served before: the patches it
// would form (one per new prefix longer than one chunk), with an unbounded store.
int new_prefixes(const std::string& policy, const Trace& t) {
  Placer p(policy, t);
  std::set<std::vector<int>> seen;
  int fresh = 0;
  for (const auto& step : t) {
    const auto order = p.order(step);
    EXPECT_TRUE(std::is_permutation(order.begin(), order.end(), step.begin(), step.end()))
        << policy << " must show exactly the step's set";
    std::vector<int> prefix;
    for (int c : order) {
      prefix.push_back(c);
      if (prefix.size() > 1 && seen.insert(prefix).second) ++fresh;
    }
    p.served(order);
  }
  return fresh;
}

}  // namespace

TEST(PlacementTrace, TracesShowDistinctChunksOfThePool) {
  for (const char* kind : {"reread", "rerank", "revisit"}) {
    std::mt19937 rng(7);
    const Trace t = make_trace(kind, 40, 4, 10, rng);
    ASSERT_EQ(t.size(), 40u) << kind;
    for (const auto& step : t) {
      ASSERT_EQ(step.size(), 4u) << kind;
      EXPECT_EQ(std::set<int>(step.begin(), step.end()).size(), 4u) << kind;
      for (int c : step) EXPECT_TRUE(c >= 0 && c < 10) << kind;
    }
  }
}

TEST(PlacementTrace, ArrivalAndLruKeepTheirDefinitions) {
  const Trace t = {{1, 2, 3}, {3, 2, 4}, {4, 1, 2}};
  Placer arrival("arrival", t), lru("lru", t);
  for (const auto& step : t) {
    EXPECT_EQ(arrival.order(step), step);
    arrival.served(step);
  }
  EXPECT_EQ(lru.order(t[0]), (std::vector<int>{1, 2, 3}));
  lru.served({1, 2, 3});
  EXPECT_EQ(lru.order(t[1]), (std::vector<int>{2, 3, 4}));  // survivors keep their order
  lru.served({2, 3, 4});
  EXPECT_EQ(lru.order(t[2]), (std::vector<int>{2, 4, 1}));
}

TEST(PlacementTrace, ReuseAwareOrdersFormFewerPatchesOnRereads) {
  // A fixed set reread in random orders: a stable order forms its k-1 patches once.
  std::mt19937 rng(3);
  Trace fixed;
  std::vector<int> set = {5, 1, 7, 2};
  for (int s = 0; s < 30; ++s) {
    std::shuffle(set.begin(), set.end(), rng);
    fixed.push_back(set);
  }
  EXPECT_EQ(new_prefixes("offline", fixed), 3);
  EXPECT_EQ(new_prefixes("online", fixed), 3);
  EXPECT_GT(new_prefixes("arrival", fixed), 20);
  for (const char* kind : {"reread", "rerank"}) {
    std::mt19937 r2(11);
    const Trace t = make_trace(kind, 60, 4, 10, r2);
    EXPECT_LT(new_prefixes("offline", t), new_prefixes("arrival", t)) << kind;
    EXPECT_LT(new_prefixes("online", t), new_prefixes("arrival", t)) << kind;
  }
}
