#include "cache/segment_index.h"

#include <algorithm>
#include <cstring>

#include "kv/kv_row.h"

namespace kamera {

int common_in_order(std::span<const ChunkId> a, std::span<const ChunkId> b) {
  std::vector<int> row(b.size() + 1, 0), prev(b.size() + 1, 0);  // LCS by rows of a
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < b.size(); ++j)
      row[j + 1] = a[i] == b[j] ? prev[j] + 1 : std::max(prev[j + 1], row[j]);
    std::swap(row, prev);
  }
  return prev[b.size()];
}

void SegmentIndex::Rows::copy_to(SeqId dst, int at) const {
  const KvLayout& layout = pool_.layout();
  const size_t elem = kv_elem_bytes(pool_.dtype());
  KAMERA_ASSERT(at >= 0 && at + pool_.n_tokens(seq_) <= pool_.n_tokens(dst));
  for (int l = 0; l < layout.n_layers; ++l) {
    // a bounded pool's window layers: the occurrence's rows must all be there (asserted)
    const std::span<const int32_t> from = pool_.slots(seq_, l), to = pool_.slots(dst, l);
    for (size_t c = 0; c < layout.channels.size(); ++c) {
      const size_t row = size_t(layout.channels[c].width) * elem;
      const auto* src = static_cast<const uint8_t*>(pool_.arena_data(l, int(c)));
      auto* out = static_cast<uint8_t*>(pool_.arena_data(l, int(c)));
      for (size_t t = 0; t < from.size(); ++t) {
        KAMERA_ASSERT(from[t] >= 0 && to[size_t(at) + t] >= 0);
        std::memcpy(out + size_t(to[size_t(at) + t]) * row, src + size_t(from[t]) * row, row);
      }
    }
  }
}

SegmentIndex::SegmentIndex(KvPool& pool, Params p, CachedPages* shared)
    : pool_(pool), params_(p), shared_(shared) {
  page_bytes_ = std::max<int64_t>(1, int64_t(pool.arena_bytes() / size_t(pool.n_pages())));
}

SegmentIndex::~SegmentIndex() {
  for (const Occurrence& o : lru_) release(o);  // the rows go with the list
}

void SegmentIndex::hold(const Occurrence& o) {
  if (o.rows) {
    own_.hold(o.rows->pages());
    if (shared_) shared_->hold(o.rows->pages());
  }
  patch_pages_ += o.patch_pages;
}

void SegmentIndex::release(const Occurrence& o) {
  if (o.rows) {
    own_.release(o.rows->pages());
    if (shared_) shared_->release(o.rows->pages());
  }
  patch_pages_ -= o.patch_pages;
}

int64_t SegmentIndex::bytes_of(const Occurrence& o) const {
  return (o.rows ? int64_t(o.rows->pages().size()) : o.patch_pages) * page_bytes_;
}

void SegmentIndex::erase(Lru::iterator it) {
  auto found = by_id_.find(it->id);
  if (found != by_id_.end()) {
    std::erase(found->second, it);
    if (found->second.empty()) by_id_.erase(found);
  }
  release(*it);
  tell(it->id, bytes_of(*it), false);
  lru_.erase(it);  // the rows' sequence is freed here, unless a hit still holds them
}

Status SegmentIndex::insert(const ChunkId& id, std::vector<ChunkId> antecedents, SeqId seq,
                            int begin, int n, bool exact) {
  if (!pool_.has_sequence(seq))
    return make_error(ErrorCode::NotFound, "segment index: unknown sequence {}", seq);
  const int len = pool_.n_tokens(seq);
  if (begin < 0 || n <= 0 || begin + n > len) {
    return make_error(ErrorCode::InvalidArgument,
                      "segment index: tokens [{}, {}) outside the {} of sequence {}", begin,
                      begin + n, len, seq);
  }
  auto fork = pool_.fork(seq);
  if (!fork.ok()) return fork.error();
  (void)pool_.erase(*fork, begin + n, len);  // within the sequence: cannot fail
  (void)pool_.erase(*fork, 0, begin);
  auto rows = std::make_shared<const Rows>(pool_, *fork);  // frees the fork when dropped
  if (int64_t(rows->pages().size()) > params_.page_budget) return Status::Ok();
  std::vector<Lru::iterator>& of = by_id_[id];
  for (auto it : of)
    if (!it->orbit && it->antecedents == antecedents) {
      erase(it);
      break;
    }
  make_room_for(id);
  lru_.push_front(
      {id, std::move(antecedents), std::move(rows), nullptr, nullptr, 0, exact, tick()});
  by_id_[id].push_back(lru_.begin());
  hold(lru_.front());
  tell(id, bytes_of(lru_.front()), true);
  shrink_to(params_.page_budget);
  return Status::Ok();
}
// Orbit occurrences are not counted: one per antecedent set at most, held under the budget alone.
void SegmentIndex::make_room_for(const ChunkId& id) {
  for (;;) {
    auto found = by_id_.find(id);
    if (found == by_id_.end()) return;
    Lru::iterator oldest = lru_.end();
    int n = 0;
    for (Lru::iterator it : found->second) {
      if (it->orbit) continue;
      ++n;
      if (oldest == lru_.end() || it->last_use < oldest->last_use) oldest = it;
    }
    if (n < std::max(1, params_.per_segment)) return;
    erase(oldest);  // may drop the vector
    ++stats_.evictions;
  }
}

SegmentIndex::Hit SegmentIndex::find(const ChunkId& id, std::span<const ChunkId> antecedents,
                                     bool latest) {
  ++stats_.lookups;
  auto found = by_id_.find(id);
  if (found == by_id_.end()) return {};
  Lru::iterator best = lru_.end();
  int best_shared = -1;
  bool exact = false;
  for (Lru::iterator it : found->second) {  // larger last_use: more recent
    if (it->orbit) continue;                // served below, to its own set only
    const bool same = it->exact && std::equal(it->antecedents.begin(), it->antecedents.end(),
                                              antecedents.begin(), antecedents.end());
    const int shared = common_in_order(it->antecedents, antecedents);
    const bool newer = best == lru_.end() || it->last_use > best->last_use;
    const bool better = latest                  ? newer
                        : same != exact         ? same
                        : shared != best_shared ? shared > best_shared
                                                : newer;
    if (best == lru_.end() || better) {
      best = it;
      best_shared = shared;
      exact = same;
    }
  }
  if (!latest && !exact) {  // an unseen ordering of a set whose orbit is held
    const std::vector<ChunkId> set = sorted_ids(antecedents);
    if (Lru::iterator o = orbit_of(id, set); o != lru_.end()) {
      best = o;
      best_shared = int(antecedents.size());  // the whole set, in another order
    }
  }
  if (best == lru_.end()) return {};
  if (best->orbit) {
    ++stats_.orbit;
    best->last_use = tick();
    lru_.splice(lru_.begin(), lru_, best);
    return {best->rows, nullptr, nullptr, Match::Orbit, best_shared, int(antecedents.size())};
  }
  Hit h{best->rows,  best->canonical,
        best->patch, latest ? Match::Latest : exact ? Match::Exact : Match::Nearest,
        best_shared, int(best->antecedents.size())};
  ++(h.match == Match::Exact     ? stats_.exact
     : h.match == Match::Nearest ? stats_.nearest
                                 : stats_.latest);
  best->last_use = tick();
  lru_.splice(lru_.begin(), lru_, best);  // iterators stay valid
  return h;
}

Result<int> SegmentIndex::compact(const ChunkId& id,
                                  std::shared_ptr<const CanonicalEntry> canonical,
                                  const Factor& factor, const Factored& factored) {
  auto found = by_id_.find(id);
  if (found == by_id_.end() || !canonical) return 0;
  int n = 0;
  for (Lru::iterator it : found->second) {
    if (!it->rows || it->orbit) continue;  // an orbit's rows are no context's: kept as they are
    const int tokens = it->rows->n_tokens();
    KAMERA_ASSIGN_OR_RETURN(
        Patch p,
        factor(read_chunk_kv(pool_, it->rows->seq(), 0, tokens, pool_.dtype()), canonical->kv));
    // Published as its antecedents' patch only when its rows are theirs (computed behind exact
    // KV): another server fetching it for those antecedents takes it as exact (store-patch).
    if (factored && it->exact) factored(it->antecedents, p);
    const size_t rows_bytes =
        size_t(tokens) * pool_.layout().floats_per_token() * kv_elem_bytes(pool_.dtype());
    if (p.bytes() >= rows_bytes) continue;  // the rows are no bigger: kept, exact
    tell(id, bytes_of(*it), false);
    release(*it);
    it->rows.reset();  // its pages go back to the pool (unless a hit still holds them)
    it->patch_pages = (int64_t(p.bytes()) + page_bytes_ - 1) / page_bytes_;
    it->canonical = canonical;
    it->patch = std::make_shared<const Patch>(std::move(p));
    hold(*it);
    tell(id, bytes_of(*it), true);
    ++n;
  }
  stats_.compacted += n;
  return n;
}

void SegmentIndex::shrink_to(int64_t pages) {
  while (pages_held() > pages && !lru_.empty()) evict_oldest();
}

void SegmentIndex::evict_oldest() {
  if (lru_.empty()) return;
  erase(std::prev(lru_.end()));
  ++stats_.evictions;
}

SegmentIndex::Stats SegmentIndex::stats() const {
  Stats s = stats_;
  s.occurrences = int64_t(lru_.size());
  s.pages = pages_held();
  s.bytes = pages_held() * page_bytes_;
  return s;
}

}  // namespace kamera
