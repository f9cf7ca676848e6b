// The grammar budget's own API (grammar/budget.h): a cancelled compile stops within a moment,
// time is a limit of its own, the limit hit is told apart, and a grammar's counted bytes are
// what its allocations hold.
#include <gtest/gtest.h>

#include <malloc.h>

#include <atomic>

#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "support/sanitizer.h"

namespace kamera::grammar {
namespace {

using ojson = nlohmann::ordered_json;

ojson any_of_strings(int n) {
  ojson s = {{"anyOf", ojson::array()}};
  for (int k = 1; k <= n; ++k) s["anyOf"].push_back({{"type", "string"}, {"maxLength", k}});
  return s;
}

TEST(GrammarBudgetApi, ACancelledCompileStopsWithinAMoment) {
  std::atomic<int> asked{0};
  // Cancelled from the fifth check on: the compile would otherwise run for minutes.
  Budget b({size_t(1) << 40, 1e9}, [&] { return ++asked >= 5; });
  auto g = json_schema_grammar(any_of_strings(2000), &b);
  EXPECT_FALSE(g.ok());
  EXPECT_EQ(b.stopped(), Budget::Stop::Cancelled);
  EXPECT_LT(b.cpu_seconds(), 1.0);
}

TEST(GrammarBudgetApi, TheTimeLimitStopsACompileTheStatesLimitAllows) {
  Budget b({size_t(1) << 40, 0.2});
  auto g = json_schema_grammar(any_of_strings(2000), &b);
  EXPECT_FALSE(g.ok());
  EXPECT_EQ(b.stopped(), Budget::Stop::Time);
  EXPECT_NE(g.message().find("CPU"), std::string::npos) << g.message();
  EXPECT_LT(b.cpu_seconds(), 0.2 + 0.5);
}

TEST(GrammarBudgetApi, AStatesLimitIsToldFromARefusedSchema) {
  Budget spent({20000, 1e9});
  EXPECT_FALSE(json_schema_grammar(any_of_strings(100), &spent).ok());
  EXPECT_EQ(spent.stopped(), Budget::Stop::States);
  Budget fine;
  EXPECT_FALSE(json_schema_grammar(ojson::parse(R"({"pattern":"a+"})"), &fine).ok());
  EXPECT_EQ(fine.stopped(), Budget::Stop::None);  // the schema's fault, not the budget's
}

// The cache evicts by Grammar::memory_bytes(): it must be what the grammar really holds.
TEST(GrammarBudgetApi, AGrammarsCountedBytesAreWhatItsAllocationsHold) {
  if (test_sanitizer::kAsan) GTEST_SKIP() << "mallinfo2 does not see ASan's allocator";
  malloc_trim(0);
  const size_t heap0 = mallinfo2().uordblks;
  auto g = json_schema_grammar(ojson::parse(R"({"type":"string","maxLength":512})"));
  ASSERT_TRUE(g.ok());
  const double held = double(mallinfo2().uordblks - heap0);
  const double counted = double((*g)->memory_bytes());
  EXPECT_GT(counted, 0.6 * held) << counted << " counted, " << held << " allocated";
  EXPECT_LT(counted, 1.5 * held) << counted << " counted, " << held << " allocated";
}

}  // namespace
}  // namespace kamera::grammar
