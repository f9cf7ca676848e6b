// The one place a prompt plan (cache/prompt_plan.h) meets the KV the caches hold: the assembler
// builds the prompt's sequence from the longest exact token prefix the prefix index holds (a
// copy-on-write fork of its pages), then, past it, every segment the segment index holds (its
// conditioned KV from an earlier context written at its new position, or the canonical plus that
// context's patch), or another server stored in the shared tiers (fetched in one batch when that is
// estimated cheaper than a forward); the tokens between are prefilled in order. It reports each
// span's source (ServedSegment) and leaves the query to the caller, whose forward of it gives the
// first token's logits. Afterwards the prompt (remember) and the segments it computed
// (keep_segments) are kept for the next prompts; long segments are queued for a canonical, formed
// off the request path (compact_one), after which their occurrences keep only a patch.
//
// The server's scheduler and the C API's sessions (kamera_prompt_*) both serve prompts through it.
// Not thread-safe: it runs on the thread that owns the context's engine and pool.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cache/idle_repair.h"
#include "cache/prefix_index.h"
#include "cache/prompt_plan.h"
#include "cache/reuse_counters.h"
#include "cache/segment_index.h"
#include "cache/served_span.h"

namespace kamera {

struct AssemblerOptions {
  // Tokens of prompts kept for exact prefix reuse; -1: a quarter of the KV pool, 0: none.
  int64_t prefix_cache_tokens = -1;
  // Bytes of pool pages of segments' conditioned KV kept for reuse past the prefix, at most a
  // quarter of the pool (-1: that quarter; 0: no segment reuse). The two are one budget: the
  // prefix entries and the segment occurrences together hold at most the pages of both, counted
  // once each, evicted least recently used first whichever kind (PromptAssembler::shrink_cached).
  int64_t segment_cache_bytes = 0;
  // On a pool bounded by the sliding window: the prefix entries that may keep the last window of
  // their local layers' rows (checkpoints, cache/prefix_index.h); the Context sizes the pool's
  // window page space for them.
  int window_entries = 8;
  // Segments of at least this many tokens get a canonical formed off the request path, and their
  // occurrences keep a patch of this rank where it is smaller than their rows (0: never).
  int compact_tokens = 64;
  int compact_rank = 32;
  size_t compact_queue = 64;  // segments waiting at most (more are not queued)
  // Segments the index misses, fetched from the store's tiers: Auto when the fetch is estimated to
  // cost less than recomputing them (the break-even), Always, or Never.
  enum class Fetch { Auto, Always, Never } fetch = Fetch::Auto;
  // Idle-time repair (cache/idle_repair.h): prompts served with segments from another context are
  // refreshed exact, and segments seen behind several orderings of one set get an orbit occurrence.
  bool idle_repair = true;
};

// What assembling a plan made of it: the sequence (all of the prompt but the query), a span per
// run of tokens with where its KV came from, and the query left to prefill. The marks (prefix_end,
// served, kept) are the assembler's, read back by remember and keep_segments.
struct Assembly {
  SeqId seq = -1;  // the caller owns it (frees it on failure too)
  std::vector<ServedSegment> spans;
  int64_t reused = 0, recomputed = 0;
  int32_t query_pos = 0;
  ChunkContent query;
  int background_queued = 0;  // segments of this prompt queued for a canonical
  int prefix_end = 0;         // tokens of the plan the prefix served
  int prefix_exact = 0;       // of those, the first ones it holds exactly (the rest: approximate)
  // How each plan segment was served. ServedStore: from the canonical and patch another server
  // stored (kept in the index afterwards, as a segment computed here, so that this server's events
  // say it holds it; not exact).
  enum Served : char { NotServed = 0, ServedExact = 1, ServedNear = 2, ServedStore = 3 };
  std::vector<char> served;  // a Served per plan segment
  // The repair budget (cache/repair_plan.h): per plan segment, the deficit estimate of a segment
  // chosen for recompute in context (< 0: not chosen; empty: none chosen); the tokens of the
  // segments held from another context (the budget's base) and those of them recomputed.
  std::vector<double> repair;
  int64_t repair_candidates = 0, repaired = 0;
  bool kept = false;  // keep_segments ran
};

class PromptAssembler {
 public:
  PromptAssembler(ChunkCache& cache, AssemblerOptions o);
  PromptAssembler(const PromptAssembler&) = delete;
  PromptAssembler& operator=(const PromptAssembler&) = delete;

  // Assembles all of `plan` but its query into a.seq. False: nothing can be reused (no token ids,
  // the reprefill policy, a query that is not text, no prefix and no segments held): the caller
  // assembles the prompt another way, a.seq untouched. The context length is the caller's check.
  Result<bool> assemble(const PromptPlan& plan, Assembly& a);
  // assemble(), or the whole prompt as the query when the caches hold none of it, then the
  // query's forward: the last token's logits. Cached KV first gives back the pages the prompt
  // lacks (the server's scheduler makes room itself; the library's callers have none). a.seq is the
  // new sequence (the caller's), also on failure.
  Result<std::vector<float>> serve(const PromptPlan& plan, Assembly& a);

  // Keeps what `seq` holds in the prefix index: the plan's tokens and the first tokens of `reply`
  // past them that seq holds (its decoded continuation; empty: the prompt alone). Exact up to the
  // first segment served from another context (or the end of the exact part of an approximate
  // prefix it was served), approximate past it (cache/prefix_index.h).
  void remember(const PromptPlan& plan, const Assembly& a, SeqId seq,
                std::span<const int32_t> reply);
  // Keeps the conditioned KV of every segment the assembly computed (or fetched) in the segment
  // index, once per assembly; queues the long ones for a canonical.
  void keep_segments(const PromptPlan& plan, Assembly& a, SeqId seq);

  // The prefix index's longest match for all of `plan` but its last token (the query's), of the
  // kinds the plan's policy may be served (approximate tails under patch and keep); none: no entry.
  PrefixIndex::Match held_prefix(const PromptPlan& plan) const;
  // Tokens of `plan` that the admission of a plan in `busy` is computing and the caches do not
  // hold yet (its common prefix past the prefix index, its segments the index misses), for the
  // one where waiting pays: whose prompt is at most plan's plus those tokens. 0: nothing shared.
  int64_t shared_in_flight(const PromptPlan& plan, std::span<const PromptPlan* const> busy) const;

  // Background work: segments waiting for a canonical, and whether the pool has room for it (two
  // whole contexts besides: a prompt arriving meanwhile never waits for these pages).
  bool background_waiting() const {
    return segments_ && (!to_compact_.empty() || (opts_.idle_repair && repair_.waiting()));
  }
  bool background_room() const;
  // Forms the oldest queued segment's canonical (one forward of [anchor · B]), then each of its
  // occurrences keeps its patch where that is smaller than its rows. Runs its forward through the
  // cache (paced like any prefill).
  void compact_one();
  // The next piece of background work: a queued canonical (compact_one), else a queued refresh,
  // else a queued orbit (prompt_assembler_repair.cpp). Its forwards run through the cache, paced.
  void background_one();
  // Prefills `plan` cold in a sequence of its own and keeps what it computed as a cold run's
  // (every segment exact behind its antecedents, the prompt in the prefix index).
  Status refresh(const PromptPlan& plan);
  // Forms (again, over more orderings) the orbit occurrence of `id` behind the sorted antecedent
  // set `set` from the exact orderings the index holds. True when one was kept.
  Result<bool> form_orbit(const ChunkId& id, const std::vector<ChunkId>& set);
  const IdleRepairQueue& repair_queue() const { return repair_; }

  // The measured seconds of a prefill token (the break-even of a store fetch).
  void note_token_seconds(double s) { token_s_ = s; }

  PrefixIndex* prefix() { return prefix_.get(); }
  SegmentIndex* segments() { return segments_.get(); }
  const PrefixIndex* prefix() const { return prefix_.get(); }
  const SegmentIndex* segments() const { return segments_.get(); }
  int64_t prefix_budget() const { return prefix_budget_; }
  // The one budget of cached KV (prefix entries and segment occurrences), in pool pages, and the
  // pages they hold, each once (plus the segments' patches' bytes in pages).
  int64_t budget_pages() const { return budget_pages_; }
  int64_t segment_budget_pages() const { return segments_ ? segment_pages_ : 0; }
  int64_t cached_pages() const;
  // The one budget and what holds it, each pool page counted once (GET /v1/stats, /metrics).
  struct CachedStats {
    int64_t budget_pages = 0, page_bytes = 0;
    int64_t pages = 0;          // held by both kinds together, each once, plus patch_pages
    int64_t prefix_pages = 0;   // held by prefix entries
    int64_t segment_pages = 0;  // held by segment occurrences' rows
    int64_t shared_pages = 0;   // held by a prefix entry and a segment occurrence both
    int64_t patch_pages = 0;    // compacted occurrences' patches (heap bytes, as pages)
    int64_t evictions = 0;      // prefix entries and segment occurrences given back whole
  };
  CachedStats cached_stats() const;
  // Evicts cached KV of both kinds, least recently used first (pinned prefix entries stay), until
  // at most `pages` are held. Returns the pages held.
  int64_t shrink_cached(int64_t pages);
  const AssemblerOptions& options() const { return opts_; }
  // Where served spans came from; the chunk and window paths of a server count here too.
  ReuseCounters& counters() { return counters_; }
  const ReuseCounters& counters() const { return counters_; }

 private:
  void make_room(int64_t tokens);
  int prefix_cut(const PromptPlan& plan, int n_tokens, bool segment_reuse) const;
  void report_prefix(const PromptPlan& plan, Assembly& a, int anchor, int n) const;
  Status serve_segments(const PromptPlan& plan, Assembly& a, int& pending);
  void plan_repair(const PromptPlan& plan,
                   const std::vector<std::optional<SegmentIndex::Hit>>& hits, Assembly& a) const;
  std::vector<std::optional<SegmentIndex::Hit>> fetch_segments(const PromptPlan& plan, int pending);
  bool fetch_worth(int64_t tokens, size_t bytes, const StoreTier::FetchCost& cost) const;
  PatchOptions compact_patch_options() const;
  Status prefill_until(const PromptPlan& plan, Assembly& a, int& pending, int end);
  void report_run(const PromptPlan& plan, Assembly& a, int begin, int end, int32_t pos) const;
  static int repair_end(const PromptPlan& plan, const Assembly& a);
  Status write_hit(const PromptSegment& s, SeqId seq, const SegmentIndex::Hit& h);
  void count_hit(const SegmentIndex::Hit& h, bool from_store);
  void queue_repairs(const PromptPlan& plan, const Assembly& a);

  ChunkCache& cache_;
  AssemblerOptions opts_;
  ReuseCounters counters_;
  CachedPages cached_;                   // both indexes' pages (declared first: it outlives them)
  std::unique_ptr<PrefixIndex> prefix_;  // null: no prefix reuse
  std::unique_ptr<SegmentIndex> segments_;  // null: no segment reuse
  int64_t prefix_budget_ = 0;               // the prefix's share, in tokens
  int64_t segment_pages_ = 0;               // the segments' share, in pages
  int64_t budget_pages_ = 0;                // both shares: the one budget
  // Long segments whose canonical is to be formed, oldest first, each once.
  std::deque<std::pair<ChunkId, std::shared_ptr<const ChunkContent>>> to_compact_;
  std::unordered_set<ChunkId, ChunkIdHash> compact_queued_;
  double token_s_ = 0;  // the caller's measure of a prefill token's seconds
  // Moving average of the seconds per token of writing a segment from its canonical and patch:
  // part of what a fetch from the store costs (fetch_worth).
  double rebuild_s_ = 0;
  IdleRepairQueue repair_;  // refreshes and orbits to form when idle (cache/idle_repair.h)
};

}  // namespace kamera
