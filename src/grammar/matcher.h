// Byte-by-byte recognition of a grammar (grammar/grammar.h): a pushdown automaton whose stacks
// are persistent and shared.
//
// A stack is a list of positions (global rule-automaton states): the top is where the current
// rule is, each entry below is where its caller resumes when the rule above it reaches a final
// state. A stack is one interned node {top position, node below}: equal stacks are the same
// node id, and stacks that share their bottom share its nodes. Two nodes are special: kAccept,
// the empty stack (the root rule is complete: the text so far is a whole document), and
// kOutside, the bottom of a stack started at a position in the middle of the grammar (the mask
// cache's walks, grammar/mask_cache.h: reaching it means "the rule I started in is done; what
// comes next depends on a stack I do not know").
//
// A matcher state is a sorted set of nodes, each "byte-ready" (its top position reads bytes) or
// kAccept / kOutside. The closure of a node makes it byte-ready: a position's call edges push
// the called rule's start (with the return position below it; a return to a final state with no
// edges pushes nothing, so right recursion and tail calls do not grow the stack), and a final
// position pops to the node below. Reading a byte moves each byte-ready node along its edges and
// takes the closure; the set of what survives is the next state, empty when the byte is not
// allowed. Ambiguity is the set holding several nodes; nothing is ever backtracked.
//
// Both closure and step are pure functions of a node id, so they are memoized per node (a
// node's step per byte class of its position): after the first time a stack is seen, reading a
// byte is a table lookup. Stacks deeper than max_depth are dropped (a grammar nests no deeper
// than that), which keeps a hostile or degenerate generation from growing one without bound.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace kamera::grammar {

class Matcher {
 public:
  static constexpr int32_t kAccept = 0;
  static constexpr int32_t kOutside = 1;

  explicit Matcher(const Grammar& g, int max_depth = 512);

  const Grammar& grammar() const { return g_; }
  // The stack {pos above below}; pos must be a position of the grammar.
  int32_t node(int32_t pos, int32_t below);
  int32_t pos(int32_t node) const { return nodes_[size_t(node)].pos; }
  int32_t below(int32_t node) const { return nodes_[size_t(node)].below; }
  int depth(int32_t node) const { return nodes_[size_t(node)].depth; }
  size_t n_nodes() const { return nodes_.size(); }
  // The heap bytes its interned stacks and memoized steps hold.
  size_t memory_bytes() const;

  // The state before any byte: the closure of the root rule's start over kAccept.
  std::vector<int32_t> initial();
  // A state of one byte-ready node at `pos` over kOutside (pos must read bytes).
  std::vector<int32_t> inside(int32_t pos);
  // The state after reading `b` from `from` (sorted, unique; empty when b is not allowed).
  void advance(std::span<const int32_t> from, uint8_t b, std::vector<int32_t>& to);
  // Byte-ready nodes of a state (kAccept and kOutside are not).
  bool byte_ready(int32_t node) const { return node > kOutside; }

  // The byte-ready nodes, kAccept and kOutside reached from `node` without reading a byte.
  // The span is valid until the next call of a non-const member.
  std::span<const int32_t> closure(int32_t node);
  // A byte-ready node after reading b (closure applied); empty when b is not allowed.
  std::span<const int32_t> step(int32_t node, uint8_t b);

 private:
  struct Node {
    int32_t pos = -1, below = -1;
    int32_t depth = 0;
    int32_t closure_off = -1, closure_len = 0;
    int32_t step_base = -1;  // first of its position's n_classes entries in steps_
  };
  struct Range {
    int32_t off = -1, len = 0;
  };
  void closure_into(int32_t node, std::vector<int32_t>& out);
  std::span<const int32_t> view(Range r) const { return {pool_.data() + r.off, size_t(r.len)}; }

  const Grammar& g_;
  int max_depth_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> index_;  // (pos, below) -> node
  std::vector<int32_t> pool_;                    // memoized closures and steps
  std::vector<Range> steps_;
  std::vector<int32_t> scratch_;
};

}  // namespace kamera::grammar
