// Helpers of the grammar tests: whole-text recognition through the matcher, and a compiled
// grammar over a small vocabulary.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace grammar_test {

// The matcher's state after reading `text` from the start of g; empty when g refuses it.
inline std::vector<int32_t> read(const kamera::grammar::Grammar& g, std::string_view text) {
  kamera::grammar::Matcher m(g);
  std::vector<int32_t> cur = m.initial(), next;
  for (char c : text) {
    m.advance(cur, uint8_t(c), next);
    if (next.empty()) return {};
    cur.swap(next);
  }
  return cur;
}

// Whether `text` is a whole document of g (every byte read, the root complete).
inline bool accepts(const kamera::grammar::Grammar& g, std::string_view text) {
  const std::vector<int32_t> s = read(g, text);
  return !s.empty() && s[0] == kamera::grammar::Matcher::kAccept;
}

// Whether `text` can still be completed into a document of g.
inline bool is_prefix(const kamera::grammar::Grammar& g, std::string_view text) {
  return !read(g, text).empty();
}

// A token drawn from softmax(logits) over the entries the mask left finite.
inline int32_t sample_masked(const std::vector<float>& logits, std::mt19937& rng) {
  std::vector<double> w(logits.size());
  for (size_t t = 0; t < w.size(); ++t) w[t] = std::isfinite(logits[t]) ? std::exp(logits[t]) : 0;
  return std::discrete_distribution<int32_t>(w.begin(), w.end())(rng);
}

inline std::shared_ptr<const kamera::grammar::Grammar> schema_grammar(const std::string& schema) {
  auto g = kamera::grammar::json_schema_grammar(nlohmann::ordered_json::parse(schema));
  EXPECT_TRUE(g.ok()) << schema << ": " << g.message();
  return g.ok() ? *g : nullptr;
}

}  // namespace grammar_test
