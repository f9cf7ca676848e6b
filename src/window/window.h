// The agent window: an ordered set of chunk slots over one pool sequence, the anchor in front.
// Every operation is a cache edit, never a re-prefill of a cached chunk:
//   admit (back or front), evict (any slot; slide = evict the head), recall an evicted chunk at
//   any place, reorder, clean view / recondition, fork (copy-on-write), dependency refresh.
// Survivors of an eviction keep their conditioned KV and only move (positions are metadata in
// the pool: the rope channel is stored pre-rotation and rotated when attention reads it).
#pragma once

#include <map>
#include <memory>
#include <span>
#include <vector>

#include "context/context.h"

namespace kamera {

// Knobs an agent sets per window.
struct WindowPolicy {
  int rank = 32;             // patch rank (kFullRank for full)
  bool deep_half = false;    // patches on the deepest half of the layers only
  bool form_on_miss = true;  // a missing patch is formed (one forward); false: blind on miss
  size_t patch_byte_budget = SIZE_MAX;  // cap on the store's patch bytes
  DType patch_dtype = DType::F32;
  int orbit_orderings = 24;  // orderings averaged into an orbit patch (all when fewer exist)
};

enum class RecallMode { Fresh, Stale, Blind };
enum class ReorderMode { Transfer, Exact, Orbit, Blind };

struct WindowSlot {
  ChunkId id;
  std::shared_ptr<const CanonicalEntry> canonical;
  int32_t position = 0;                 // position of the chunk's start
  std::vector<ChunkId> conditioned_on;  // antecedents its rows were conditioned on ([]: canonical)
  std::shared_ptr<const PatchEntry> patch;  // applied to the canonical (null: none)
  bool conditioned = false;  // rows carry conditioning on conditioned_on (a leading exact chunk
                             // counts, conditioned on nothing); false for blind rows
  bool orbit = false;        // the patch is an orbit patch: valid for any order of conditioned_on
  bool clean = false;        // clean view: canonical rows although a patch is known
  int n_tokens() const { return canonical->content.n(); }
  int32_t extent() const { return canonical->content.extent(); }
};

// What disposable() saw: the query's greedy continuation with and without one chunk's
// conditioning.
struct DisposableReport {
  std::vector<int32_t> with_conditioning, clean_view;
  bool answer_changes = false;
  int first_difference = -1;  // index of the first differing token, -1 when equal
};

class Window {
 public:
  // Creates an empty window (just the anchor) on a new sequence of the context's pool.
  static Result<std::unique_ptr<Window>> create(Context& ctx, const WindowPolicy& policy);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  SeqId sequence() const { return seq_; }
  const std::vector<WindowSlot>& slots() const { return slots_; }
  const WindowPolicy& policy() const { return policy_; }
  void set_policy(const WindowPolicy& p);
  int32_t next_position() const;    // where a query after the last chunk starts
  int token_index(int slot) const;  // first token of a slot in the sequence

  // Admission. At the back the chunk is conditioned on the whole window (its patch, formed on a
  // miss per policy); at the front it has no antecedent and is exact, and every other slot's
  // conditioning becomes stale (see stale_slots()).
  Status admit_back(const ChunkContent& c);
  Status admit_front(const ChunkContent& c);

  // Eviction keeps the chunk's canonical in the store and remembers the patch it carried, for a
  // stale recall; survivors after it move back by its extent (rotation only, no bytes touched).
  Status evict(int slot);
  Status evict_front() { return evict(0); }
  Status evict_back() { return evict(int(slots_.size()) - 1); }

  // Re-admits a chunk (its canonical must be in the store) before slot `at` (at == size: back).
  // Fresh: a rank-m patch formed on its now-fixed earlier context (storable, never stale);
  // Stale: the patch it carried when evicted; Blind: canonical only.
  Status recall(const ChunkId& id, int at, RecallMode mode);

  // New order: new slot i = old slot order[i]. Transfer keeps every chunk's rows (its stored
  // patch from the old order); Exact forms each ordering's own patches; Orbit uses one orbit patch
  // per chunk (mean deficit over orderings of its antecedent set); Blind serves canonicals.
  Status reorder(std::span<const int> order, ReorderMode mode);

  // Clean view: the slot's rows become its canonical (a copy, no arithmetic). Recondition:
  // canonical + its patch again (one rank-m add). Both exact and reversible.
  Status clean_view(int slot);
  Status recondition(int slot);

  // Slots whose rows were conditioned on antecedents other than the ones now before them (after a
  // recall, an admission at the front, an eviction or a reorder): the dependency cascade.
  std::vector<int> stale_slots() const;
  // Re-forms the slot's patch on its current antecedents and rewrites its rows.
  Status refresh(int slot);
  // Cheaper refresh: re-forwards only the slot's own tokens behind the rows now in front of it
  // (n tokens instead of antecedents + chunk) and keeps canonical + the rank-m factors of the
  // result as its rows (exactly the result at full rank). The patch is the slot's own, not stored:
  // it was conditioned on the rows held in front, so refresh stale slots front to back.
  Status refresh_in_place(int slot);

  // Copy-on-write fork: the branch shares every page until it writes.
  Result<std::unique_ptr<Window>> fork() const;

  // Logits of a query placed after the window (on a scratch fork: the window is unchanged).
  Result<std::vector<float>> query(const ChunkContent& q, LogitsMode mode = LogitsMode::All);
  // Greedy continuation of the query (n tokens), with and without slot's conditioning.
  Result<DisposableReport> disposable(int slot, const ChunkContent& q, int n_tokens);

  Status check_invariants() const;

 private:
  Window(Context& ctx, const WindowPolicy& policy, SeqId seq);
  PatchOptions patch_options() const;
  std::vector<ChunkContent> contents(int begin, int end) const;
  std::vector<ChunkId> ids(int begin, int end) const;
  Status write_rows(int slot);     // canonical (+ patch unless clean) into the pool
  void reposition_from(int slot);  // contiguous positions from `slot` on (metadata)
  Status insert_slot(int at, WindowSlot slot);
  Result<std::shared_ptr<const PatchEntry>> patch_for(int slot_index, const ChunkContent& c);

  Context& ctx_;
  ChunkCache& cache_;  // ctx_'s
  KvPool& pool_;       // ctx_'s
  WindowPolicy policy_;
  SeqId seq_;
  std::vector<WindowSlot> slots_;
  struct Evicted {
    std::vector<ChunkId> conditioned_on;
    std::shared_ptr<const PatchEntry> patch;
  };
  std::map<std::pair<uint64_t, uint64_t>, Evicted> evicted_;
  std::vector<float> scratch_;
};

}  // namespace kamera
