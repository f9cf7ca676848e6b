// A context-free grammar over bytes, held as one finite automaton per rule (a "recursive
// transition network"): a rule's automaton reads bytes along byte-range edges and calls other
// rules along call edges; a call returns to the edge's target when the called rule reaches one
// of its final states. Sequences, alternatives and repetition live inside a rule's automaton
// (grammar/expr.h builds them), so only real nesting (a value inside an object, an object inside
// an array) costs a call.
//
// Every state of every rule has one global id (a "position"); the matcher (grammar/matcher.h)
// keeps stacks of positions. finish() checks what the matcher relies on: every called rule is
// defined, no rule can call itself (directly or through others) before reading a byte (left
// recursion), and no loop of a rule runs through calls that read nothing. It also trims states
// from which no final state can be reached, so every position the matcher can be at still has
// a way to complete.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kamera::grammar {

// A rule's automaton as it is built: local states, start 0.
struct Automaton {
  struct Edge {
    int32_t to = 0;
    int32_t rule = -1;  // >= 0: a call of this rule (lo, hi unused); -1: one byte in [lo, hi]
    uint8_t lo = 0, hi = 0;
  };
  struct State {
    bool final = false;
    std::vector<Edge> edges;
  };
  std::vector<State> states;

  int32_t add_state(bool final = false);
  void add_bytes(int32_t from, int32_t to, uint8_t lo, uint8_t hi);
  void add_call(int32_t from, int32_t to, int32_t rule);
};

class Grammar {
 public:
  struct Edge {
    int32_t to = 0;  // global state id
    uint8_t lo = 0, hi = 0;
  };
  struct Call {
    int32_t rule = 0;
    int32_t to = 0;  // global state id the call returns to
  };
  struct State {
    int32_t rule = 0;
    bool final = false;
    bool tail = false;        // final with no edges: a call returning here returns to its caller's
                              // caller (the return needs no stack entry)
    std::vector<Edge> bytes;  // until finish(); then its byte table holds them
    std::vector<Call> calls;
    int32_t byte_table = -1;  // index of its byte-class table, -1 when it reads no byte
    bool reads() const { return byte_table >= 0; }
  };

  // A rule id, defined later (rules may call rules defined after them).
  int32_t declare(std::string name);
  // The rule's states: a copy of `a`, start at its state 0.
  Status define(int32_t rule, const Automaton& a);
  // Checks and trims (see the file comment) and fixes the root. Call once, after every define.
  Status finish(int32_t root);

  int32_t root() const { return root_; }
  int32_t n_rules() const { return int32_t(rules_.size()); }
  const std::string& rule_name(int32_t rule) const { return rules_[size_t(rule)].name; }
  int32_t start(int32_t rule) const { return rules_[size_t(rule)].start; }
  int32_t n_states() const { return int32_t(states_.size()); }
  const State& state(int32_t s) const { return states_[size_t(s)]; }

  // Byte classes of a state that reads bytes: class 0 reads nothing, class c >= 1 goes to the
  // targets of targets(s, c) (several only in a nondeterministic rule).
  uint8_t byte_class(int32_t s, uint8_t b) const { return classes_[size_t(table(s).classes)][b]; }
  int n_classes(int32_t s) const { return int(table(s).n); }
  std::span<const int32_t> targets(int32_t s, int c) const {
    const Range& r = target_sets_[size_t(table(s).first + c - 1)];
    return {target_pool_.data() + r.off, size_t(r.len)};
  }

  // The heap bytes the finished grammar holds (what a cache of grammars counts).
  size_t memory_bytes() const;

 private:
  struct Rule {
    std::string name;
    int32_t start = -1;  // -1: declared, not defined
    int32_t n_states = 0;
  };
  // A state's byte table: its class of each byte (one of classes_, shared by every state that
  // splits the bytes alike) and each class's targets (target_sets_[first + c - 1]).
  struct ByteTable {
    int32_t classes = 0;
    int32_t first = 0;
    int32_t n = 0;
  };
  struct Range {
    int32_t off = 0, len = 0;
  };
  const ByteTable& table(int32_t s) const { return tables_[size_t(states_[size_t(s)].byte_table)]; }

  Status check_calls() const;
  std::vector<bool> nullable_rules() const;
  Status check_left_recursion() const;
  void trim();
  Status build_tables();

  std::vector<Rule> rules_;
  std::vector<State> states_;
  std::vector<ByteTable> tables_;
  std::vector<std::array<uint8_t, 256>> classes_;
  std::vector<Range> target_sets_;
  std::vector<int32_t> target_pool_;
  int32_t root_ = -1;
};

}  // namespace kamera::grammar
