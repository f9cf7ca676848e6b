// Repairs formed in idle engine time (issue 52, "patches formed where they will pay"), so that a
// context served approximately once is served faithfully when it is seen again:
//   - refresh: a prompt served with segments from another context (the nearest context's rows, an
//     orbit, another server's patch) is queued; off the request path its prompt is prefilled cold
//     and every segment's occurrence behind its true antecedents is kept exact in the segment
//     index (replacing the approximate ones of the same antecedents), the prompt in the prefix
//     index: the same context seen again (a window, a reranked set in the same order) is served
//     exact;
//   - orbit: a segment seen behind two or more orderings of one antecedent set gets an orbit
//     occurrence, the mean of those orderings' rows (C_B + mean Δ: the paper's orbit patch, §5, at
//     full rank), served to an ordering of the set not seen (cache/segment_index.h, Match::Orbit).
// Both run as the prompt assembler's background work (PromptAssembler::background_one), paced and
// preempted as the canonicals are, and what they keep is held under the one cached-KV budget.
// This file holds the queues and the mean of the rows; prompt_assembler_repair.cpp the work.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cache/prompt_plan.h"
#include "kv/pool.h"
#include "reuse/chunk.h"

namespace kamera {

class IdleRepairQueue {
 public:
  struct Orbit {
    ChunkId id;
    std::vector<ChunkId> set;  // sorted (sorted_ids)
  };
  explicit IdleRepairQueue(size_t max_refresh = 16, size_t max_orbits = 64)
      : max_refresh_(max_refresh), max_orbits_(max_orbits) {}

  // Queues a prompt's refresh (once while queued; none past the cap). True when queued.
  bool queue_refresh(const PromptPlan& plan);
  // Queues the orbit of (id, set) (once while queued; none past the cap). True when queued.
  bool queue_orbit(const ChunkId& id, std::vector<ChunkId> set);
  bool waiting() const { return !refresh_.empty() || !orbits_.empty(); }
  size_t refreshes_waiting() const { return refresh_.size(); }
  size_t orbits_waiting() const { return orbits_.size(); }
  // The oldest queued refresh, else nothing.
  std::optional<PromptPlan> next_refresh();
  std::optional<Orbit> next_orbit();

 private:
  size_t max_refresh_, max_orbits_;
  std::deque<std::pair<uint64_t, PromptPlan>> refresh_;
  std::deque<std::pair<uint64_t, Orbit>> orbits_;
  std::unordered_set<uint64_t> queued_;  // keys of both queues
};

// A new sequence of `pool` holding the mean of the rows of `members` (sequences of one length),
// token by token, layer by layer, channel by channel, summed in double from the rows converted to
// f32 and written back in the pool's dtype (rounded once); its positions are the first member's.
// Fails cleanly (nothing left behind) with fewer than two members, lengths that differ, a member
// missing a window row (bounded pools), or a full pool.
Result<SeqId> mean_rows(KvPool& pool, std::span<const SeqId> members);

}  // namespace kamera
