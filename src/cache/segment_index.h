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
// Memory: pool pages. An occurrence's rows stay where the request computed them: the index
// forks the computing sequence (KvPool::fork) and erases all but the segment's tokens, so storing
// one copies no row (the pages are shared copy-on-write with that sequence, with the prefix
// index's entry of the same prompt and with the other segments of that prompt), and serving one
// copies its rows pool to pool into the new sequence's fresh tokens (Rows::copy_to, byte for byte:
// the pool keeps keys before rotation, so they are the relocation R(p) as they are). Why a fork
// and a copy rather than splicing the occurrence's pages into the new sequence: a segment rarely
// starts on a page boundary, and the pool's sequences only share whole pages that they then never
// append into; a copy of the segment's rows is what relocation costs anyway, and it leaves the new
// sequence with pages of its own. Nothing is ever copied to the heap and back (the KV a patch is
// factored from is read once, off the request path, by compact()).
//
// The budget counts pool pages, each page once however many occurrences hold it (a CachedPages);
// the prompt assembler hands the prefix index and this index one shared CachedPages too, so both
// are held under one budget and evicted in one least recently used order
// (PromptAssembler::shrink_cached). An occurrence handed out by find() is shared (Rows is held by
// a shared_ptr and frees its pool sequence when the last holder lets go), so eviction never takes
// a page a request is being served from. At most `per_segment` contexts are kept per segment (the
// most recent). A long segment's occurrences may be compacted once its canonical C_B = KV(B |
// anchor) is formed (off the request path, Scheduler): each keeps only its patch, the top-m SVD
// of its deficit Δ = KV(B | A) − C_B, where that is smaller than the rows (its pages go back to
// the pool; the patch's heap bytes count as the pages of as many bytes); a hit then serves
// C_B + U_m Σ_m V_mᵀ.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/cached_pages.h"
#include "kv/pool.h"
#include "reuse/chunk.h"
#include "reuse/chunk_kv.h"
#include "reuse/patch.h"
#include "store/store.h"

namespace kamera {

class SegmentIndex {
 public:
  enum class Match { None, Exact, Nearest, Latest };

  struct Params {
    int64_t page_budget = 0;  // pool pages all occurrences may hold, each once (0: none kept)
    int per_segment = 4;      // contexts kept per segment
  };

  // An occurrence's rows: a pool sequence of the index's holding exactly the segment's tokens
  // (their pages shared copy-on-write with whoever else holds them), freed when its last holder,
  // the index or a hit, lets go. Single-threaded, as the pool.
  class Rows {
   public:
    Rows(KvPool& pool, SeqId seq) : pool_(pool), seq_(seq), pages_(pages_of(pool, seq)) {}
    ~Rows() { pool_.free_sequence(seq_); }
    Rows(const Rows&) = delete;
    Rows& operator=(const Rows&) = delete;
    SeqId seq() const { return seq_; }
    int n_tokens() const { return pool_.n_tokens(seq_); }
    const std::vector<int32_t>& pages() const { return pages_; }
    // Copies every row into tokens [at, at + n_tokens()) of `dst` (writable: fresh from
    // KvPool::insert), byte for byte in the pool's dtype.
    void copy_to(SeqId dst, int at) const;

   private:
    KvPool& pool_;
    SeqId seq_;
    std::vector<int32_t> pages_;
  };

  struct Hit {
    std::shared_ptr<const Rows> rows;  // the rows, or null (no occurrence, or compacted)
    std::shared_ptr<const CanonicalEntry> canonical;  // compacted: C_B and the patch
    std::shared_ptr<const Patch> patch;
    Match match = Match::None;
    int shared = 0;        // antecedents in common with the request's (in order)
    int antecedents = -1;  // the occurrence's antecedents (-1: not known, a store's)
    bool found() const { return rows || canonical; }
  };
  // Factors an occurrence's rows against the canonical (cache/chunk_cache's form_patch).
  using Factor = std::function<Result<Patch>(const ChunkKV& rows, const ChunkKV& canonical)>;
  // Told each patch compact() factors (the occurrence's antecedents and the patch), kept or not:
  // the caller may store it where other servers find it.
  using Factored = std::function<void(std::span<const ChunkId> antecedents, const Patch& p)>;
  // Told every change of what the index holds: an occurrence of `id` stored (its bytes: its pages'
  // or its patch's) or dropped (evicted, replaced; a compaction is a drop of the rows and a store
  // of the patch).
  using Observer = std::function<void(const ChunkId& id, int64_t bytes, bool stored)>;

  struct Stats {
    int64_t occurrences = 0;
    int64_t pages = 0;  // pool pages the occurrences hold (each once) and their patches' share
    int64_t bytes = 0;  // the same in bytes
    int64_t lookups = 0;
    int64_t exact = 0, nearest = 0, latest = 0;
    int64_t evictions = 0;
    int64_t compacted = 0;  // occurrences that keep a patch instead of their rows
  };

  // shared: where the occurrences' pages are also counted (and the clock read) together with the
  // prefix index's (null: this index alone).
  SegmentIndex(KvPool& pool, Params p, CachedPages* shared = nullptr);
  ~SegmentIndex();
  SegmentIndex(const SegmentIndex&) = delete;
  SegmentIndex& operator=(const SegmentIndex&) = delete;

  // Records tokens [begin, begin + n) of `seq` as KV(id | antecedents): the index forks seq and
  // keeps those tokens only (no row copied; seq is not changed). exact: computed behind exact KV
  // only. Replaces an occurrence with the same antecedents. An occurrence whose pages alone
  // exceed the budget is not kept. Fails cleanly (nothing kept) on an unknown sequence, a span
  // outside it, or a pool out of sequence ids.
  Status insert(const ChunkId& id, std::vector<ChunkId> antecedents, SeqId seq, int begin, int n,
                bool exact = true);

  // Replaces the rows of id's occurrences by their patches against `canonical` where the patch is
  // smaller. Returns how many were compacted.
  Result<int> compact(const ChunkId& id, std::shared_ptr<const CanonicalEntry> canonical,
                      const Factor& factor, const Factored& factored = {});
  void set_observer(Observer o) { observer_ = std::move(o); }

  // The best occurrence of `id` behind `antecedents` (exact, else nearest), or with latest the
  // most recent one. Marks it recently used.
  Hit find(const ChunkId& id, std::span<const ChunkId> antecedents, bool latest);

  bool contains(const ChunkId& id) const { return by_id_.count(id) != 0; }
  // Evicts least recently used occurrences until at most `pages` are held.
  void shrink_to(int64_t pages);
  // Evicts the least recently used occurrence (none held: nothing).
  void evict_oldest();
  // When the least recently used occurrence was last used (on the shared clock), UINT64_MAX when
  // none is held.
  uint64_t oldest_use() const { return lru_.empty() ? UINT64_MAX : lru_.back().last_use; }
  // Pool pages the occurrences hold, each once, plus their patches' bytes in pages.
  int64_t pages_held() const { return own_.pages() + patch_pages_; }
  // The patches' share alone (held on the heap, not in the pool).
  int64_t patch_pages() const { return patch_pages_; }
  int64_t page_bytes() const { return page_bytes_; }
  Stats stats() const;

 private:
  struct Occurrence {
    ChunkId id;
    std::vector<ChunkId> antecedents;
    std::shared_ptr<const Rows> rows;
    std::shared_ptr<const CanonicalEntry> canonical;
    std::shared_ptr<const Patch> patch;
    int64_t patch_pages = 0;  // compacted: the patch's bytes in pages
    bool exact = true;
    uint64_t last_use = 0;  // the clock when it was inserted or last found
  };
  using Lru = std::list<Occurrence>;  // most recent first

  void erase(Lru::iterator it);
  void hold(const Occurrence& o);
  void release(const Occurrence& o);
  int64_t bytes_of(const Occurrence& o) const;
  uint64_t tick() { return shared_ ? shared_->tick() : own_.tick(); }

  void tell(const ChunkId& id, int64_t bytes, bool stored) const {
    if (observer_) observer_(id, bytes, stored);
  }

  KvPool& pool_;
  Params params_;
  int64_t page_bytes_ = 0;  // bytes of one pool page over all its arenas
  CachedPages own_;
  CachedPages* shared_ = nullptr;
  int64_t patch_pages_ = 0;
  Observer observer_;
  Lru lru_;
  std::unordered_map<ChunkId, std::vector<Lru::iterator>, ChunkIdHash> by_id_;
  Stats stats_;
};

// The longest common subsequence of two id lists (how many antecedents two contexts share in
// order).
int common_in_order(std::span<const ChunkId> a, std::span<const ChunkId> b);

}  // namespace kamera
