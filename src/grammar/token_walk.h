// Walks tokens of a TokenTrie (in its sorted order) through a Matcher from one state, keeping
// the matcher's state after each byte of the current token: a token starts from the state after
// the prefix it shares with the token walked before it, and once a prefix leaves no byte-ready
// node, every following token sharing that prefix gets the same fate without a step.
//
// A token's fate: Accepted (some stack survives all its bytes; reaching kAccept or kOutside with
// its last byte counts), Escaped (no stack survives, but one reached kOutside, i.e. left the rule
// the walk started in, with bytes still to read: its fate depends on the stack below), Rejected.
#pragma once

#include <climits>
#include <cstdint>
#include <span>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace kamera::grammar {

enum class Fate : uint8_t { Rejected, Accepted, Escaped };

class TokenWalk {
 public:
  TokenWalk(Matcher& m, const TokenTrie& trie) : m_(m), trie_(trie) {}

  // Every ordered token from `start`; visit(rank, fate) for the Accepted and Escaped ones.
  template <class Visit>
  void all(std::span<const int32_t> start, Visit&& visit);
  // The ranks of `ranks` (increasing) from `start`; visit(rank, fate) for each.
  template <class Visit>
  void some(std::span<const int32_t> start, std::span<const int32_t> ranks, Visit&& visit);

  size_t steps() const { return steps_; }  // matcher advances made (for the bench)

 private:
  void reset(std::span<const int32_t> start);
  // Fate of the token at `rank`, which shares `shared` bytes with the token walked before it.
  Fate fate(int32_t rank, int32_t shared);
  // The fate of a token that dies at depth d (d < its length).
  Fate died_at(int32_t d) const;
  // Frame k (the state after k bytes) as a range of nodes_.
  int32_t first(int32_t k) const { return off_[size_t(k)]; }
  int32_t last(int32_t k) const { return off_[size_t(k) + 1]; }
  bool byte_ready(int32_t k) const {
    return last(k) > first(k) && nodes_[size_t(last(k) - 1)] > Matcher::kOutside;
  }
  bool outside(int32_t k) const;
  // Frame k + 1 from frame k and byte b (frames above k are dropped).
  void extend(int32_t k, uint8_t b);

  Matcher& m_;
  const TokenTrie& trie_;
  std::vector<int32_t> nodes_;    // the frames' nodes, frame after frame (each sorted)
  std::vector<int32_t> off_;      // off_[k]: where frame k starts in nodes_
  std::vector<uint8_t> escaped_;  // escaped_[k]: kOutside in a frame before k
  int32_t have_ = 0;              // frames 0..have_ hold the current prefix
  int32_t dead_ = INT_MAX;        // a frame <= have_ with no byte-ready node
  size_t steps_ = 0;
};

template <class Visit>
void TokenWalk::all(std::span<const int32_t> start, Visit&& visit) {
  reset(start);
  const int32_t n = trie_.n_ordered();
  for (int32_t i = 0; i < n;) {
    const Fate f = fate(i, trie_.lcp(i));
    if (f != Fate::Rejected) visit(i, f);
    ++i;
    if (dead_ == INT_MAX) continue;
    // Every following token sharing the dead prefix has the same fate.
    const int32_t d = dead_;
    const Fate g = died_at(d);
    if (d == 1 && g == Fate::Rejected) {
      i = std::max(i, trie_.end_of(uint8_t(trie_.ordered_bytes(i - 1)[0])));
      continue;
    }
    for (; i < n && trie_.lcp(i) >= d; ++i)
      if (g != Fate::Rejected) visit(i, g);
  }
}

template <class Visit>
void TokenWalk::some(std::span<const int32_t> start, std::span<const int32_t> ranks,
                     Visit&& visit) {
  reset(start);
  int32_t prev = -1;
  for (int32_t r : ranks) {
    int32_t shared = 0;
    if (prev >= 0 && r == prev + 1) {
      shared = trie_.lcp(r);
    } else if (prev >= 0) {
      const std::string_view a = trie_.ordered_bytes(prev);
      const std::string_view b = trie_.ordered_bytes(r);
      while (size_t(shared) < a.size() && size_t(shared) < b.size() &&
             a[size_t(shared)] == b[size_t(shared)])
        ++shared;
    }
    visit(r, fate(r, shared));
    prev = r;
  }
}

}  // namespace kamera::grammar
