// Exact prefix reuse: token sequences the server has computed (live and recently finished
// requests), each with its KV held in the pool, found again by the longest common token prefix.
//
// Design. An entry is a token list plus a pool sequence the index owns: a copy-on-write fork
// (KvPool::fork, as n choices are forked) of the sequence that computed those tokens, truncated
// to them. Forking shares every page, so holding an entry costs no copy; the live sequence that
// keeps decoding writes its new tokens to pages of its own (the pool never appends into a shared
// page), and a request served from an entry gets a fork of it: many requests share a prefix's
// pages until one of them writes.
//
// Lookup compares tokens, never text (a client that resends a reply as text may re-tokenize it
// differently; the match stops at the first differing token). To avoid comparing every entry,
// the tokens are cut into blocks of `block_tokens` and each full block is named by a chained hash
// (the hash of the block's tokens and of the previous block's name, as vLLM's prefix caching
// names its blocks): the entries holding the deepest block name the query also has are the only
// candidates, and the match is then extended token by token past the last full block (and
// verified from the start, so a hash collision can only cost a shorter match, never a wrong
// one). A query that shares no full block falls back to comparing the few tokens of a block with
// each entry.
//
// Memory, page by page. The budget counts the pool pages the entries hold, each page once however
// many entries share it (a system prompt forked into every conversation costs its pages once), in
// tokens (pages x page tokens). Past the budget, entries give back their tail pages, a block at a
// time, rather than go whole: a conversation that comes back finds the first part of what it sent
// and recomputes only the rest. Which tails go first: every entry may keep a fair share of the
// budget (the budget over the entries). Tokens that no lookup has used yet go before those a lookup
// was served (`proven`): first those above the entry's share, then the rest of them; then proven
// tokens above the share, then any; within each, the least recently used entry first. So
// conversations that come back in turn, whose prompts together exceed the budget, keep about
// budget/working-set of each prompt instead of thrashing as whole-entry LRU does (each entry
// evicted just before it is asked for again), while entries never used again lose their pages
// before the reused ones. A request's KV never depends on an entry: it is served from a fork, which
// lives on its own page refcounts whatever happens to the entry afterwards. Pins only order the
// cuts: the scheduler pins the entry a waiting request would be served from while it makes room
// for that request (the others give back their pages first). An entry whose tokens are a prefix of
// a new entry is replaced by it (turn n+1 of a chat extends turn n), unless pinned.
//
// Exact and approximate rows. An entry's first `exact` tokens hold what a cold run of them
// computes; the rest (its approximate tail) are rows a request was answered from that a cold run
// would not have computed: those behind a segment served from another context
// (cache/segment_index.h). They are that conversation's own history (its later turns extend it), so
// they are kept, but apart: the tail's blocks are named only in the index of all blocks, the exact
// part's also in an index of exact blocks, and a lookup asks for one kind. An exact lookup (the
// default) never returns a token past an entry's exact part, and is found through the exact blocks
// alone (so an entry whose tail matches deeper never hides another entry's longer exact part); an
// approximate lookup returns the longest match of either kind, the exact one on a tie. Eviction
// treats both alike (the tail is the entry's tail). An entry replaces one it extends only when it
// is at least as exact over it.
//
// One budget with the segment index. The prompt assembler hands both indexes one CachedPages
// (cache/cached_pages.h): the pages of prefix entries and segment occurrences are counted there
// once, whoever holds them, and read on one clock, so that PromptAssembler::shrink_cached evicts
// across both in least recently used order (this index's turn gives back tails as above).
//
// Pools bounded by the sliding window (KvPool, "Window layers"; Params::window > 0). A sequence
// there gives back its local layers' rows as the window passes them, so an entry holds every
// global-layer row of its tokens but only the local-layer rows of its last window or so: a
// checkpoint at its end, as llama.cpp's SWA checkpoints. A prefix of n tokens can be resumed only
// where the entry holds a local row for every token a query at position pos(n - 1) + 1 reads
// (resumable); lookups return the longest resumable match over all entries (never the rows of a
// deeper match the window no longer holds: a cold run reads exactly those rows). What an entry
// keeps: the local rows of its last window - 1 + block_tokens tokens (so a prompt that extends it
// up to a block before its end resumes too); an entry covered by a newer one stays while it holds
// a checkpoint the newer one lacks (the prompt before its reply: a regenerated or retokenized turn
// resumes there). At most `window_entries` entries hold checkpoints (their local rows are in the
// pool's window page space, sized for them by the Context); the least recently used goes whole
// past that, and a tail cut that leaves an entry unresumable takes all of it.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/cached_pages.h"
#include "core/status.h"
#include "kv/pool.h"

namespace kamera {

class PrefixIndex {
 public:
  using EntryId = int64_t;

  struct Params {
    int block_tokens = 16;     // tokens per hashed block (the pool's page size fits)
    int64_t token_budget = 0;  // tokens all entries may hold together (0: none cached)
    // Bounded pools (see above): the sliding window W of the pool's window layers (0: the pool
    // keeps every row, or has no window layers), and the entries that may hold checkpoints.
    int window = 0;
    int window_entries = 8;
  };

  struct Match {
    EntryId entry = -1;  // -1: no entry shares a token with the query
    int n_tokens = 0;    // the longest common prefix of the query and the entry
    int exact = 0;       // of those, the first ones the entry holds exactly (all: an exact lookup)
  };

  struct Stats {
    int64_t entries = 0;
    int64_t tokens_held = 0;
    int64_t lookups = 0;
    int64_t hits = 0;  // lookups that matched at least one token
    int64_t tokens_matched = 0;
    int64_t evictions = 0;           // entries given back whole
    int64_t tokens_evicted = 0;      // tokens given back, by whole entries and by tails
    int64_t tokens_approximate = 0;  // tokens held in entries' approximate tails
  };

  // shared: where the entries' pages are also counted (and the clock read) together with another
  // index's (null: this index alone).
  PrefixIndex(KvPool& pool, Params params, CachedPages* shared = nullptr);
  ~PrefixIndex();  // frees every entry's sequence
  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;

  // Records that tokens [0, tokens.size()) of `seq` hold the KV of `tokens` (seq may hold more:
  // the entry keeps only these). The index forks seq; seq is not changed. Returns the entry, or
  // -1 when nothing was added: an entry already holds these tokens (it is touched), the tokens
  // alone exceed the budget, or the budget cannot be met but by giving back all of the new entry
  // (the rest is pinned). The new entry may keep less than `tokens` (its tail given back to the
  // budget); it starts with the tokens the entry it extends had served (proven). exact: how many
  // of the tokens hold what a cold run computes (the rest: an approximate tail); -1: all.
  // Fails cleanly (nothing changed) when seq is unknown or shorter than tokens.
  Result<EntryId> insert(SeqId seq, std::span<const int32_t> tokens, int exact = -1);

  // The longest prefix of `tokens` some entry holds exactly (approximate: or holds at all, the
  // exact match on a tie). Marks the entry recently used, and those tokens of it proven (served to
  // a request).
  Match lookup(std::span<const int32_t> tokens, bool approximate = false);
  // The same, without marking it (a scheduler asking what a queued prompt would reuse).
  Match best_match(std::span<const int32_t> tokens, bool approximate = false) const;

  // Whether a request may resume the entry's first n tokens: on a bounded pool, the entry holds
  // the window rows a query right after them reads (always true otherwise; false for an unknown
  // entry or n beyond it).
  bool resumable(EntryId entry, int n_tokens) const;

  // A new pool sequence (the caller owns it) sharing the first n tokens of the entry's pages,
  // positions included. Fails cleanly on an unknown entry or n beyond it.
  Result<SeqId> fork_prefix(EntryId entry, int n_tokens);

  // An entry pinned while held: it is not evicted. Pins nest.
  Status pin(EntryId entry);
  void unpin(EntryId entry);

  // Gives back tail pages of unpinned entries (in the order above; an entry left with no token
  // is erased) until the pages held are at most `tokens` worth. Returns the tokens held (more
  // than `tokens` when the rest is pinned).
  int64_t shrink_to(int64_t tokens);
  // When the least recently used unpinned entry was last used (on the shared clock), UINT64_MAX
  // when every entry is pinned or there is none.
  uint64_t oldest_use() const;

  bool contains(EntryId entry) const { return entries_.count(entry) != 0; }
  std::span<const int32_t> tokens(EntryId entry) const;  // empty for an unknown entry
  int exact_tokens(EntryId entry) const;                 // its exact part (0: unknown entry)
  // The pool pages the entries hold (each once), in tokens.
  int64_t tokens_held() const { return own_.pages() * pool_.page_tokens(); }
  const Params& params() const { return params_; }
  Stats stats() const;

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::vector<uint64_t> block_names;  // one per full block
    int exact = 0;                      // tokens from the start a cold run computes
    SeqId seq = -1;
    uint64_t last_use = 0;
    int pins = 0;
    int proven = 0;              // tokens from the start a lookup was served
    std::vector<int32_t> pages;  // the pool pages of its tokens, each once
  };

  using Blocks = std::unordered_map<uint64_t, std::vector<EntryId>>;  // block name -> entries
  std::vector<uint64_t> block_names(std::span<const int32_t> tokens) const;
  std::vector<EntryId> candidates(const Blocks& blocks, const std::vector<uint64_t>& names) const;
  Match best_of(std::span<const int32_t> tokens, std::span<const EntryId> ids,
                bool approximate) const;
  Match best_in(const Blocks& blocks, std::span<const int32_t> tokens,
                const std::vector<uint64_t>& names, bool approximate) const;
  static size_t exact_blocks(const Entry& e, int block_tokens);
  void unname(EntryId id, size_t blocks, size_t exact_blocks);  // its names past those counts
  bool bounded() const { return params_.window > 0 && pool_.bounded_window(); }
  bool holds_window(SeqId seq, int n) const;  // resumable (prefix_index_window.cpp)
  void erase(EntryId id);
  // Unpinned entries that are prefixes of `tokens` and hold at most `exact` of them exactly (on a
  // bounded pool: not those resumable where the new entry `seq` is not).
  void drop_covered(std::span<const int32_t> tokens, int exact, SeqId seq);
  // Bounded pools (prefix_index_window.cpp): the new entry keeps its last window's rows only
  // (false: it holds no checkpoint); the least recently used past window_entries go.
  bool keep_checkpoint(SeqId seq, int n);
  void limit_checkpoints(EntryId keep);
  // Eviction (prefix_index_evict.cpp): the entry's pages counted in, or out; its tail cut to n.
  void hold_pages(Entry& e);
  void release_pages(Entry& e);
  void cut(EntryId id, int n);
  EntryId victim(int64_t share, int phase, int& floor) const;

  KvPool& pool_;
  Params params_;
  std::unordered_map<EntryId, Entry> entries_;
  Blocks by_block_;        // every full block of every entry
  Blocks by_exact_block_;  // the full blocks of the entries' exact parts
  EntryId next_id_ = 0;
  CachedPages own_;                // the entries' pages
  CachedPages* shared_ = nullptr;  // the same counted with the segment index's (may be null)
  uint64_t tick() { return shared_ ? shared_->tick() : own_.tick(); }
  Stats stats_;
};

}  // namespace kamera
