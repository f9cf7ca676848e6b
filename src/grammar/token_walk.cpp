#include "grammar/token_walk.h"

#include <algorithm>

namespace kamera::grammar {

void TokenWalk::reset(std::span<const int32_t> start) {
  const size_t depth = trie_.max_len() + 1;
  escaped_.assign(depth + 1, 0);
  off_.assign(depth + 1, 0);
  nodes_.assign(start.begin(), start.end());
  off_[1] = int32_t(nodes_.size());
  have_ = 0;
  dead_ = byte_ready(0) ? INT_MAX : 0;
}

bool TokenWalk::outside(int32_t k) const {
  const int32_t a = first(k), b = last(k);
  return (b > a && nodes_[size_t(a)] == Matcher::kOutside) ||
         (b > a + 1 && nodes_[size_t(a) + 1] == Matcher::kOutside);
}

void TokenWalk::extend(int32_t k, uint8_t b) {
  const int32_t a = first(k), e = last(k);
  nodes_.resize(size_t(e));
  int sources = 0;
  for (int32_t i = a; i < e; ++i) {
    const int32_t n = nodes_[size_t(i)];
    if (!m_.byte_ready(n)) continue;
    auto s = m_.step(n, b);
    if (s.empty()) continue;
    nodes_.insert(nodes_.end(), s.begin(), s.end());
    ++sources;
  }
  if (sources > 1) {
    std::sort(nodes_.begin() + e, nodes_.end());
    nodes_.erase(std::unique(nodes_.begin() + e, nodes_.end()), nodes_.end());
  }
  off_[size_t(k) + 2] = int32_t(nodes_.size());
  ++steps_;
}

Fate TokenWalk::died_at(int32_t d) const {
  const bool esc = escaped_[size_t(d)] || outside(d);
  return esc ? Fate::Escaped : Fate::Rejected;
}

Fate TokenWalk::fate(int32_t rank, int32_t shared) {
  const std::string_view s = trie_.ordered_bytes(rank);
  const int32_t len = int32_t(s.size());
  have_ = std::min(have_, shared);
  if (dead_ > have_) dead_ = INT_MAX;
  // Extend the frames over this token's bytes until it ends or nothing can read on.
  while (dead_ == INT_MAX && have_ < len) {
    escaped_[size_t(have_) + 1] = escaped_[size_t(have_)] || outside(have_);
    extend(have_, uint8_t(s[size_t(have_)]));
    ++have_;
    if (!byte_ready(have_)) dead_ = have_;
  }
  if (dead_ < len) return died_at(dead_);
  if (last(len) > first(len)) return Fate::Accepted;
  return escaped_[size_t(len)] ? Fate::Escaped : Fate::Rejected;
}

}  // namespace kamera::grammar
