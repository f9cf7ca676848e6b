// StringTable against std::unordered_map as the reference: every id's bytes come back, every
// string finds the first id that holds it, and strings never added are not found.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/string_table.h"

namespace kamera {
namespace {

std::string random_string(std::mt19937& rng) {
  std::uniform_int_distribution<int> len(0, 24), byte(0, 255), small(0, 3);
  std::string s(size_t(len(rng)), '\0');
  // A narrow alphabet now and then, so that many strings share prefixes and hash neighbours.
  const bool narrow = small(rng) == 0;
  for (char& c : s) c = char(narrow ? 'a' + small(rng) : byte(rng));
  return s;
}

TEST(StringTable, MatchesAMapOfCopies) {
  for (const int n : {0, 1, 2, 17, 1000, 40000}) {
    std::mt19937 rng(uint32_t(n) + 7);
    std::vector<std::string> strings;
    std::unordered_map<std::string, int32_t> first;
    StringTable t;
    for (int i = 0; i < n; ++i) {
      // Every fifth string repeats an earlier one: the first id must win.
      std::string s = i % 5 == 4 ? strings[size_t(rng() % uint32_t(i))] : random_string(rng);
      t.add(s);
      first.emplace(s, int32_t(i));
      strings.push_back(std::move(s));
    }
    EXPECT_EQ(t.find("x"), -1) << "no index yet";
    t.build_index();
    ASSERT_EQ(t.size(), size_t(n));
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(t.at(i), strings[size_t(i)]) << "n=" << n << " id " << i;
      ASSERT_EQ(t.find(strings[size_t(i)]), first.at(strings[size_t(i)])) << "n=" << n;
    }
    for (int i = 0; i < 2000; ++i) {
      const std::string s = random_string(rng) + "\001absent";
      ASSERT_EQ(t.find(s), first.count(s) ? first.at(s) : -1);
    }
  }
}

}  // namespace
}  // namespace kamera
