#include "grammar/matcher.h"

#include <algorithm>

namespace kamera::grammar {

namespace {

void sort_unique(std::vector<int32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

Matcher::Matcher(const Grammar& g, int max_depth) : g_(g), max_depth_(max_depth) {
  nodes_.resize(2);  // kAccept, kOutside: their own closures, never stepped
  for (int32_t n : {kAccept, kOutside}) {
    nodes_[size_t(n)].closure_off = int32_t(pool_.size());
    nodes_[size_t(n)].closure_len = 1;
    pool_.push_back(n);
  }
}

int32_t Matcher::node(int32_t pos, int32_t below) {
  const uint64_t key = (uint64_t(uint32_t(pos)) << 32) | uint32_t(below);
  auto [it, fresh] = index_.try_emplace(key, int32_t(nodes_.size()));
  if (fresh) {
    Node n;
    n.pos = pos;
    n.below = below;
    n.depth = nodes_[size_t(below)].depth + 1;
    nodes_.push_back(n);
  }
  return it->second;
}

std::vector<int32_t> Matcher::initial() {
  const int32_t start = g_.start(g_.root());
  if (g_.state(start).tail) return {kAccept};
  auto c = closure(node(start, kAccept));
  return std::vector<int32_t>(c.begin(), c.end());
}

size_t Matcher::memory_bytes() const {
  // An unordered_map entry: the pair, the next pointer and the cached hash, plus its bucket.
  const size_t entry = sizeof(std::pair<const uint64_t, int32_t>) + 2 * sizeof(void*);
  return nodes_.capacity() * sizeof(Node) + index_.size() * entry +
         index_.bucket_count() * sizeof(void*) + pool_.capacity() * sizeof(int32_t) +
         steps_.capacity() * sizeof(Range) + scratch_.capacity() * sizeof(int32_t);
}

std::vector<int32_t> Matcher::inside(int32_t pos) {
  return {node(pos, kOutside)};
}

void Matcher::closure_into(int32_t n, std::vector<int32_t>& out) {
  const Node nd = nodes_[size_t(n)];
  const Grammar::State& st = g_.state(nd.pos);
  if (st.reads()) out.push_back(n);
  if (st.final) {
    auto c = closure(nd.below);
    out.insert(out.end(), c.begin(), c.end());
  }
  for (const Grammar::Call& call : st.calls) {
    const int32_t ret = g_.state(call.to).tail ? nd.below : node(call.to, nd.below);
    if (nodes_[size_t(ret)].depth >= max_depth_) continue;
    auto c = closure(node(g_.start(call.rule), ret));
    out.insert(out.end(), c.begin(), c.end());
  }
}

std::span<const int32_t> Matcher::closure(int32_t n) {
  if (nodes_[size_t(n)].closure_off < 0) {
    std::vector<int32_t> out;
    closure_into(n, out);
    sort_unique(out);
    nodes_[size_t(n)].closure_off = int32_t(pool_.size());
    nodes_[size_t(n)].closure_len = int32_t(out.size());
    pool_.insert(pool_.end(), out.begin(), out.end());
  }
  return view(Range{nodes_[size_t(n)].closure_off, nodes_[size_t(n)].closure_len});
}

std::span<const int32_t> Matcher::step(int32_t n, uint8_t b) {
  const int32_t p = nodes_[size_t(n)].pos;
  const int c = g_.byte_class(p, b);
  if (c == 0) return {};
  if (nodes_[size_t(n)].step_base < 0) {
    nodes_[size_t(n)].step_base = int32_t(steps_.size());
    steps_.resize(steps_.size() + size_t(g_.n_classes(p)));
  }
  const size_t slot = size_t(nodes_[size_t(n)].step_base + c - 1);
  if (steps_[slot].off < 0) {
    std::vector<int32_t> out;
    const int32_t below = nodes_[size_t(n)].below;
    for (int32_t t : g_.targets(p, c)) {
      auto cl = closure(g_.state(t).tail ? below : node(t, below));
      out.insert(out.end(), cl.begin(), cl.end());
    }
    sort_unique(out);
    steps_[slot] = Range{int32_t(pool_.size()), int32_t(out.size())};
    pool_.insert(pool_.end(), out.begin(), out.end());
  }
  return view(steps_[slot]);
}

void Matcher::advance(std::span<const int32_t> from, uint8_t b, std::vector<int32_t>& to) {
  to.clear();
  size_t sources = 0;
  for (int32_t n : from) {
    if (!byte_ready(n)) continue;
    auto s = step(n, b);
    if (s.empty()) continue;
    to.insert(to.end(), s.begin(), s.end());
    ++sources;
  }
  if (sources > 1) sort_unique(to);
}

}  // namespace kamera::grammar
