// Position-free segments seen in context: the conditioned KV a request computed for each segment
// of its prompt (a chat message, a paragraph: cache/prompt_plan.h), kept so that a later
// prompt holding the same segment at another position, behind other antecedents, is served
// without a forward.
//
// An occurrence is KV(B | A) of segment B behind its ordered antecedents A (the ids of the
// segments before it), stored position-free: the pool keeps keys before rotation and positions
// as metadata, so writing the rows at a new position is the exact relocation R(p). A later prompt
// asks for B behind A':
//   - exact:   an occurrence with A = A' computed behind exact KV only (bit-identical rows: what a
//              re-prefill computes, when the prompt up to B is the same). Rows computed behind a
//              reused segment that was not exact are marked so, and never served as exact;
//   - nearest: the occurrence whose antecedents share the most with A' in order (the longest
//              common subsequence; ties go to the most recent). A slide's survivors find the
//              window they were conditioned in, less the evicted segment; a look-back finds the
//              context it was evicted from. Conditioned KV is C_B plus the full deficit Δ, so
//              this is the nearest context's patch at full rank;
//   - latest:  the most recent occurrence whatever its antecedents (llama.cpp's --cache-reuse:
//              the previous turn's KV relocated as is).
//
// Memory: occurrences count their rows' bytes against a budget, least recently used evicted
// first; an occurrence handed out is shared (shared_ptr), so eviction never takes rows a request
// is still writing from. At most `per_segment` contexts are kept per segment (the most recent).
// A long segment's occurrences may be compacted once its canonical C_B = KV(B | anchor) is formed
// (off the request path, Scheduler): each keeps only its patch, the top-m SVD of its deficit
// Δ = KV(B | A) − C_B, where that is smaller than the rows; a hit then serves C_B + U_m Σ_m V_mᵀ.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "reuse/chunk.h"
#include "reuse/chunk_kv.h"
#include "reuse/patch.h"
#include "store/store.h"

namespace kamera {

class SegmentIndex {
 public:
  enum class Match { None, Exact, Nearest, Latest };

  struct Params {
    size_t byte_budget = 0;  // bytes of rows all occurrences may hold (0: none kept)
    int per_segment = 4;     // contexts kept per segment
  };

  struct Hit {
    std::shared_ptr<const ChunkKV> kv;  // the rows, or null (no occurrence, or compacted)
    std::shared_ptr<const CanonicalEntry> canonical;  // compacted: C_B and the patch
    std::shared_ptr<const Patch> patch;
    Match match = Match::None;
    int shared = 0;  // antecedents in common with the request's (in order)
    bool found() const { return kv || canonical; }
  };
  // Factors an occurrence's rows against the canonical (cache/chunk_cache's form_patch).
  using Factor = std::function<Result<Patch>(const ChunkKV& rows, const ChunkKV& canonical)>;
  // Told each patch compact() factors (the occurrence's antecedents and the patch), kept or not:
  // the caller may store it where other servers find it.
  using Factored = std::function<void(std::span<const ChunkId> antecedents, const Patch& p)>;
  // Told every change of what the index holds: an occurrence of `id` stored (its bytes) or
  // dropped (evicted, replaced; a compaction is a drop of the rows and a store of the patch).
  using Observer = std::function<void(const ChunkId& id, int64_t bytes, bool stored)>;

  struct Stats {
    int64_t occurrences = 0;
    int64_t bytes = 0;
    int64_t lookups = 0;
    int64_t exact = 0, nearest = 0, latest = 0;
    int64_t evictions = 0;
    int64_t compacted = 0;  // occurrences that keep a patch instead of their rows
  };

  explicit SegmentIndex(Params p) : params_(p) {}

  // Records KV(id | antecedents); exact: computed behind exact KV only. Replaces an occurrence
  // with the same antecedents. Rows larger than the whole budget are not kept.
  void insert(const ChunkId& id, std::vector<ChunkId> antecedents, ChunkKV kv, bool exact = true);

  // Replaces the rows of id's occurrences by their patches against `canonical` where the patch is
  // smaller. Returns how many were compacted.
  Result<int> compact(const ChunkId& id, std::shared_ptr<const CanonicalEntry> canonical,
                      const Factor& factor, const Factored& factored = {});
  void set_observer(Observer o) { observer_ = std::move(o); }

  // The best occurrence of `id` behind `antecedents` (exact, else nearest), or with latest the
  // most recent one. Marks it recently used.
  Hit find(const ChunkId& id, std::span<const ChunkId> antecedents, bool latest);

  bool contains(const ChunkId& id) const { return by_id_.count(id) != 0; }
  // Evicts least recently used occurrences until at most `bytes` are held.
  void shrink_to(size_t bytes);
  size_t bytes_held() const { return bytes_; }
  Stats stats() const;

 private:
  struct Occurrence {
    ChunkId id;
    std::vector<ChunkId> antecedents;
    std::shared_ptr<const ChunkKV> kv;
    std::shared_ptr<const CanonicalEntry> canonical;
    std::shared_ptr<const Patch> patch;
    size_t bytes = 0;
    bool exact = true;
    uint64_t last_use = 0;  // the index's clock when it was inserted or last found
  };
  using Lru = std::list<Occurrence>;  // most recent first

  void erase(Lru::iterator it);

  void tell(const ChunkId& id, size_t bytes, bool stored) const {
    if (observer_) observer_(id, int64_t(bytes), stored);
  }

  Params params_;
  Observer observer_;
  Lru lru_;
  std::unordered_map<ChunkId, std::vector<Lru::iterator>, ChunkIdHash> by_id_;
  size_t bytes_ = 0;
  uint64_t clock_ = 0;
  Stats stats_;
};

// The longest common subsequence of two id lists (how many antecedents two contexts share in
// order).
int common_in_order(std::span<const ChunkId> a, std::span<const ChunkId> b);

}  // namespace kamera
