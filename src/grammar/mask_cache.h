// What the vocabulary does at each grammar position, whatever stack lies below it: the part of
// a token mask that can be computed once per (grammar, vocabulary) and reused by every step of
// every generation that uses them.
//
// For a position p (a state that reads bytes), walking every token from the stack {p} over
// kOutside (grammar/token_walk.h) sorts the vocabulary into
//   - accepted: the token's bytes stay inside p's rule (or leave it exactly at the last byte):
//     allowed from any stack whose top is p;
//   - escaped: the rule ends before the token does: allowed or not depending on the stack below
//     (a string's closing quote followed by ",": it depends on what encloses the string);
//   - rejected: the rest, never allowed from p.
// Inside a JSON string nearly every token is accepted and only those with a quote followed by
// more bytes are escaped, so a step's mask is a union of cached sets plus a walk of a few
// escaped tokens through the real stack (grammar/constraint.h).
//
// Positions are filled on first use, under a lock, so generations sharing a CompiledGrammar
// (the same schema on the same model) share the work.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace kamera::grammar {

// A set of token ids: a bitset when dense, a sorted list when sparse.
struct TokenSet {
  std::vector<uint64_t> bits;  // empty when `list` holds the set
  std::vector<int32_t> list;
  size_t size = 0;
  void add_to(std::vector<uint64_t>& out) const;
};

struct PositionMasks {
  TokenSet accepted;
  std::vector<int32_t> escaped;  // trie ranks, increasing
};

struct MaskCacheStats {
  size_t positions = 0;              // positions filled
  double fill_seconds = 0;           // time spent filling them
  double fill_seconds_max = 0;       // the slowest position
  size_t steps = 0;                  // matcher steps the fills took
  size_t accepted = 0, escaped = 0;  // summed over positions
};

class CompiledGrammar {
 public:
  CompiledGrammar(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTrie> trie);

  const Grammar& grammar() const { return *grammar_; }
  const TokenTrie& trie() const { return *trie_; }
  // The masks of a position that reads bytes (filled now if it is the first time).
  const PositionMasks& masks(int32_t pos) const;
  MaskCacheStats stats() const;
  // The heap bytes it holds now: the grammar, and the masks and walks filled so far (they grow
  // as generations reach new positions). Read without waiting for a fill.
  size_t memory_bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  mutable std::mutex mu_;
  mutable Matcher walker_;  // its stacks all sit on kOutside
  mutable std::unordered_map<int32_t, std::unique_ptr<PositionMasks>> by_pos_;
  mutable MaskCacheStats stats_;
  size_t grammar_bytes_ = 0;
  mutable size_t mask_bytes_ = 0;
  mutable std::atomic<size_t> bytes_{0};
};

}  // namespace kamera::grammar
