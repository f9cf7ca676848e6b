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
// Memory. Every entry counts its tokens against `token_budget` (an upper bound on its pages:
// pages shared by entries are counted once per entry). Inserting past the budget evicts the
// least recently used entries that are not pinned. A request pins the entry it was served from
// while it reads it (Lease); an entry in use is never evicted, and a fork handed out lives on its
// own refcounts whatever happens to the entry. An entry whose tokens are a prefix of a new entry
// is replaced by it (turn n+1 of a chat extends turn n), unless pinned.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/pool.h"

namespace kamera {

class PrefixIndex {
 public:
  using EntryId = int64_t;

  struct Params {
    int block_tokens = 16;     // tokens per hashed block (the pool's page size fits)
    int64_t token_budget = 0;  // tokens all entries may hold together (0: none cached)
  };

  struct Match {
    EntryId entry = -1;  // -1: no entry shares a token with the query
    int n_tokens = 0;    // the longest common prefix of the query and the entry
  };

  struct Stats {
    int64_t entries = 0;
    int64_t tokens_held = 0;
    int64_t lookups = 0;
    int64_t hits = 0;  // lookups that matched at least one token
    int64_t tokens_matched = 0;
    int64_t evictions = 0;
  };

  PrefixIndex(KvPool& pool, Params params);
  ~PrefixIndex();  // frees every entry's sequence
  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;

  // Records that tokens [0, tokens.size()) of `seq` hold the KV of `tokens` (seq may hold more:
  // the entry keeps only these). The index forks seq; seq is not changed. Returns the entry, or
  // -1 when nothing was added: an entry already holds these tokens (it is touched), the tokens
  // alone exceed the budget, or the budget cannot be met because what is left is pinned.
  // Fails cleanly (nothing changed) when seq is unknown or shorter than tokens.
  Result<EntryId> insert(SeqId seq, std::span<const int32_t> tokens);

  // The longest prefix of `tokens` some entry holds. Marks the entry recently used.
  Match lookup(std::span<const int32_t> tokens);
  // The same, without marking it (a scheduler asking what a queued prompt would reuse).
  Match best_match(std::span<const int32_t> tokens) const;

  // A new pool sequence (the caller owns it) sharing the first n tokens of the entry's pages,
  // positions included. Fails cleanly on an unknown entry or n beyond it.
  Result<SeqId> fork_prefix(EntryId entry, int n_tokens);

  // An entry pinned while held: it is not evicted. Pins nest.
  Status pin(EntryId entry);
  void unpin(EntryId entry);

  // Evicts unpinned entries, least recently used first, until at most `tokens` are held.
  // Returns the tokens still held (more than `tokens` when the rest is pinned).
  int64_t shrink_to(int64_t tokens);

  bool contains(EntryId entry) const { return entries_.count(entry) != 0; }
  std::span<const int32_t> tokens(EntryId entry) const;  // empty for an unknown entry
  int64_t tokens_held() const { return tokens_held_; }
  const Params& params() const { return params_; }
  Stats stats() const;

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::vector<uint64_t> block_names;  // one per full block
    SeqId seq = -1;
    uint64_t last_use = 0;
    int pins = 0;
  };

  std::vector<uint64_t> block_names(std::span<const int32_t> tokens) const;
  std::vector<EntryId> candidates(const std::vector<uint64_t>& names, size_t& depth) const;
  void erase(EntryId id);
  void drop_covered(std::span<const int32_t> tokens);  // unpinned entries that are its prefixes

  KvPool& pool_;
  Params params_;
  std::unordered_map<EntryId, Entry> entries_;
  std::unordered_map<uint64_t, std::vector<EntryId>> by_block_;  // block name -> entries
  EntryId next_id_ = 0;
  uint64_t clock_ = 0;
  int64_t tokens_held_ = 0;
  Stats stats_;
};

}  // namespace kamera
