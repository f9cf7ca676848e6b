// Synthetic agent traces and placement policies of the placement bench (bench/placement_bench.h
// says what each one is). Plain data: a trace is, per step, chunk indices in the agent's order.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace kamera {

using Trace = std::vector<std::vector<int>>;  // steps x k chunk indices (arrival order)

// kind: reread, rerank or revisit; k chunks per step out of pool_chunks (k <= pool_chunks).
Trace make_trace(const std::string& kind, int steps, int k, int pool_chunks, std::mt19937& rng);

// Orders each step's set under one policy (arrival, lru, online, offline) and remembers what it
// served: the ordered prefixes (a patch is keyed by the chunks in front of it) and how often each
// chunk was shown.
class Placer {
 public:
  Placer(std::string policy, const Trace& trace);
  std::vector<int> order(const std::vector<int>& arrival);
  void served(const std::vector<int>& order);  // call after each step

 private:
  std::vector<int> greedy(const std::vector<int>& set, const std::map<int, int>& freq) const;

  std::string policy_;
  std::set<std::vector<int>> prefixes_;  // every prefix of every served order
  std::vector<int> previous_;
  std::map<int, int> seen_, total_, first_;
  int step_ = 0;
};

}  // namespace kamera
