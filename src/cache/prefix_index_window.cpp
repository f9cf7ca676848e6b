// PrefixIndex on pools bounded by the sliding window (cache/prefix_index.h, "Pools bounded by the
// sliding window"): which prefixes of an entry can be resumed, the checkpoint an entry keeps, and
// how many entries keep one.
#include <algorithm>

#include "cache/prefix_index.h"

namespace kamera {

// A query at position pos(n - 1) + 1 reads the window rows of tokens at positions from
// pos(n - 1) + 2 - W on (Engine::window_rows); every one of them must still be held.
bool PrefixIndex::holds_window(SeqId seq, int n) const {
  if (!bounded() || n <= 0) return true;
  const int32_t from = pool_.positions(seq)[size_t(n - 1)].t + 2 - params_.window;
  return pool_.missing_window_row(seq, from, n) < 0;
}

// The new entry's sequence (n tokens) gives back the window rows below its last
// W - 1 + block_tokens tokens' (a prompt that extends it within a block of its end still
// resumes); false when it cannot be resumed at its end (its window was given back already).
bool PrefixIndex::keep_checkpoint(SeqId seq, int n) {
  if (!holds_window(seq, n)) return false;
  const int32_t last = pool_.positions(seq)[size_t(n - 1)].t;
  pool_.drop_window_rows(seq, last + 2 - params_.window - params_.block_tokens, n);
  return true;
}

// At most window_entries entries hold checkpoints: the least recently used unpinned ones go
// whole; `keep` (the newest) goes itself when every other one is pinned.
void PrefixIndex::limit_checkpoints(EntryId keep) {
  const size_t cap = size_t(std::max(0, params_.window_entries));
  while (entries_.size() > cap) {
    EntryId v = -1;
    uint64_t oldest = UINT64_MAX;
    for (const auto& [id, e] : entries_)
      if (id != keep && e.pins == 0 && e.last_use < oldest) v = id, oldest = e.last_use;
    if (v < 0) v = keep;
    stats_.tokens_evicted += int64_t(entries_.at(v).tokens.size());
    ++stats_.evictions;
    erase(v);
    if (v == keep) return;
  }
}

}  // namespace kamera
