#include "bench/placement_trace.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "core/status.h"

namespace kamera {

namespace {

// The same k chunks in a new random order each step; one in six steps swaps one for another.
Trace reread(int steps, int k, int n, std::mt19937& rng) {
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int> set(all.begin(), all.begin() + k);
  Trace t;
  for (int s = 0; s < steps; ++s) {
    if (s > 0 && rng() % 6 == 0 && n > k) {
      int out = int(rng() % k), in;
      do in = int(rng() % n);
      while (std::find(set.begin(), set.end(), in) != set.end());
      set[out] = in;
    }
    std::vector<int> shown = set;
    std::shuffle(shown.begin(), shown.end(), rng);
    t.push_back(shown);
  }
  return t;
}

// Top-k of n chunks by relevance scores that drift (a random walk on a fixed base), best first.
Trace rerank(int steps, int k, int n, std::mt19937& rng) {
  std::normal_distribution<double> base(0.0, 1.0), drift(0.0, 0.35);
  std::vector<double> score(n);
  for (auto& x : score) x = base(rng);
  Trace t;
  for (int s = 0; s < steps; ++s) {
    for (auto& x : score) x += drift(rng);
    std::vector<int> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return score[a] > score[b]; });
    t.emplace_back(idx.begin(), idx.begin() + k);
  }
  return t;
}

// A stream: chunk c arrives at step c (mod n); the window shows the k-1 newest in arrival order
// and, at half the steps, one older chunk looked back at, in front (where it arrived).
Trace revisit(int steps, int k, int n, std::mt19937& rng) {
  Trace t;
  for (int s = 0; s < steps; ++s) {
    const int newest = s + k - 1;  // stream index of the newest chunk shown
    std::vector<int> shown;
    const int oldest_kept = newest - (k - 2);
    if (rng() % 2 == 0 && oldest_kept > 1) {
      const int back = int(rng() % std::min(oldest_kept, n - k + 1));
      shown.push_back((oldest_kept - 1 - back) % n);
    } else {
      shown.push_back((oldest_kept - 1) % n);  // the plain window: one more of the newest
    }
    for (int c = oldest_kept; c <= newest; ++c) shown.push_back(c % n);
    t.push_back(shown);
  }
  return t;
}

}  // namespace

Trace make_trace(const std::string& kind, int steps, int k, int n, std::mt19937& rng) {
  KAMERA_ASSERT(k >= 1 && k <= n);
  if (kind == "reread") return reread(steps, k, n, rng);
  if (kind == "rerank") return rerank(steps, k, n, rng);
  KAMERA_ASSERT(kind == "revisit");
  return revisit(steps, k, n, rng);
}

Placer::Placer(std::string policy, const Trace& trace) : policy_(std::move(policy)) {
  int s = 0;
  for (const auto& step : trace) {
    for (int c : step) {
      ++total_[c];
      first_.emplace(c, s);
    }
    ++s;
  }
}

// Slot by slot: a chunk whose patch behind the prefix so far was served (the ordered prefix plus
// it is known), then the most frequent, then the earliest seen, then the lowest index.
std::vector<int> Placer::greedy(const std::vector<int>& set, const std::map<int, int>& freq) const {
  std::vector<int> left = set, out;
  auto key = [&](int c) {
    auto p = out;
    p.push_back(c);
    const auto f = freq.find(c);
    const auto first = first_.find(c);
    return std::make_tuple(prefixes_.count(p) > 0, f == freq.end() ? 0 : f->second,
                           -(first == first_.end() ? 0 : first->second), -c);
  };
  while (!left.empty()) {
    auto best =
        std::max_element(left.begin(), left.end(), [&](int a, int b) { return key(a) < key(b); });
    out.push_back(*best);
    left.erase(best);
  }
  return out;
}

std::vector<int> Placer::order(const std::vector<int>& arrival) {
  if (policy_ == "arrival") return arrival;
  if (policy_ == "lru") {
    std::vector<int> out;
    for (int c : previous_)
      if (std::find(arrival.begin(), arrival.end(), c) != arrival.end()) out.push_back(c);
    for (int c : arrival)
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    return out;
  }
  if (policy_ == "online") {
    auto freq = seen_;
    for (int c : arrival) ++freq[c];  // the current step counts
    return greedy(arrival, freq);
  }
  KAMERA_ASSERT(policy_ == "offline");
  return greedy(arrival, total_);
}

void Placer::served(const std::vector<int>& order) {
  std::vector<int> p;
  for (int c : order) {
    p.push_back(c);
    prefixes_.insert(p);
    ++seen_[c];
  }
  previous_ = order;
  ++step_;
}

}  // namespace kamera
