// PrefixIndex's memory: the pool pages its entries hold, each counted once, and the tails they
// give back when the pages are over the budget (cache/prefix_index.h, "Memory, page by page").
#include <algorithm>

#include "cache/prefix_index.h"

namespace kamera {

void PrefixIndex::hold_pages(Entry& e) {
  e.pages = pages_of(pool_, e.seq);
  own_.hold(e.pages);
  if (shared_) shared_->hold(e.pages);
}

void PrefixIndex::release_pages(Entry& e) {
  own_.release(e.pages);
  if (shared_) shared_->release(e.pages);
  e.pages.clear();
}

// Keeps the first n tokens of the entry (its blocks past them unnamed); none, or on a bounded pool
// a prefix it cannot resume: the entry goes.
void PrefixIndex::cut(EntryId id, int n) {
  Entry& e = entries_.at(id);
  const int len = int(e.tokens.size());
  n = std::clamp(n, 0, len);
  if (!holds_window(e.seq, n)) n = 0;  // a bounded pool's entry is kept only where it resumes
  stats_.tokens_evicted += len - n;
  if (n == 0) {
    erase(id);
    ++stats_.evictions;
    return;
  }
  release_pages(e);
  (void)pool_.truncate(e.seq, n);  // n is within the sequence: cannot fail
  const size_t blocks = std::min(size_t(n / params_.block_tokens), e.block_names.size());
  unname(id, blocks, std::min(exact_blocks(e, params_.block_tokens), blocks));
  e.block_names.resize(blocks);
  e.exact = std::min(e.exact, n);
  e.tokens.resize(size_t(n));
  e.proven = std::min(e.proven, n);
  hold_pages(e);
}

// The unpinned entry to cut next in `phase`, least recently used first; floor: where it may be
// cut to. Phases: 0, tokens no lookup used above the entry's share; 1, tokens no lookup used;
// 2, any above the share; 3, any.
PrefixIndex::EntryId PrefixIndex::victim(int64_t share, int phase, int& floor) const {
  EntryId best = -1;
  uint64_t oldest = UINT64_MAX;
  for (const auto& [id, e] : entries_) {
    if (e.pins > 0 || e.last_use >= oldest) continue;
    const int64_t f = phase == 0   ? std::max<int64_t>(share, e.proven)
                      : phase == 1 ? e.proven
                      : phase == 2 ? share
                                   : 0;
    if (int64_t(e.tokens.size()) <= f) continue;
    best = id;
    oldest = e.last_use;
    floor = int(f);
  }
  return best;
}

uint64_t PrefixIndex::oldest_use() const {
  uint64_t oldest = UINT64_MAX;
  for (const auto& [id, e] : entries_)
    if (e.pins == 0) oldest = std::min(oldest, e.last_use);
  return oldest;
}

int64_t PrefixIndex::shrink_to(int64_t tokens) {
  const int bt = params_.block_tokens;
  while (tokens_held() > tokens) {
    const int64_t share = std::max<int64_t>(0, tokens) / std::max<int64_t>(1, entries_.size());
    int floor = 0;
    EntryId v = -1;
    for (int phase = 0; phase < 4 && v < 0; ++phase) v = victim(share, phase, floor);
    if (v < 0) break;  // the rest is pinned
    // Down by what is over, in whole blocks, not below the floor (but for its last partial block).
    const int len = int(entries_.at(v).tokens.size());
    const int64_t want = std::max<int64_t>(floor, len - (tokens_held() - tokens));
    const int n = int(std::min<int64_t>((want + bt - 1) / bt * bt, (len - 1) / bt * bt));
    cut(v, n);
  }
  return tokens_held();
}

}  // namespace kamera
