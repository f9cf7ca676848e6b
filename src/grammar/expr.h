// Regular expressions over bytes and rule calls, compiled into one rule's automaton
// (grammar/grammar.h): literals, byte sets, sequences, alternatives, bounded or unbounded
// repetition, and calls of other rules. compile() builds a Thompson automaton with empty moves,
// then a deterministic one by subset construction over the alphabet of bytes and called rules,
// so alternatives sharing a prefix ("red" | "rose") read it once and the matcher keeps one stack
// where a nondeterministic rule would keep several.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/budget.h"
#include "grammar/grammar.h"

namespace kamera::grammar {

using ByteSet = std::bitset<256>;

ByteSet byte_range(uint8_t lo, uint8_t hi);

class Expr {
 public:
  Expr();                                 // the empty string
  static Expr bytes(const ByteSet& set);  // one byte of the set
  static Expr range(uint8_t lo, uint8_t hi) { return bytes(byte_range(lo, hi)); }
  static Expr lit(std::string_view text);
  static Expr call(int32_t rule);
  static Expr seq(std::vector<Expr> parts);
  static Expr alt(std::vector<Expr> options);  // needs at least one option
  // min..max times; max < 0: unbounded.
  static Expr repeat(Expr e, int min, int max);
  static Expr opt(Expr e) { return repeat(std::move(e), 0, 1); }
  static Expr star(Expr e) { return repeat(std::move(e), 0, -1); }

  // The rule's automaton, each state built (of the Thompson automaton and of the deterministic
  // one) charged to `budget`: fails once the budget does (a bounded repetition is copied once
  // per count, so a long one can be costly).
  Result<Automaton> compile(Budget& budget) const;
  // The same under a budget of `max_states` states and no time limit.
  Result<Automaton> compile(size_t max_states = 200000) const;

  struct Node;
  const Node& node() const { return *node_; }

 private:
  explicit Expr(std::shared_ptr<const Node> n) : node_(std::move(n)) {}
  std::shared_ptr<const Node> node_;
};

}  // namespace kamera::grammar
