#include "cache/segment_index.h"

#include <algorithm>

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

void SegmentIndex::erase(Lru::iterator it) {
  auto found = by_id_.find(it->id);
  if (found != by_id_.end()) {
    std::erase(found->second, it);
    if (found->second.empty()) by_id_.erase(found);
  }
  bytes_ -= it->bytes;
  tell(it->id, it->bytes, false);
  lru_.erase(it);
}

void SegmentIndex::insert(const ChunkId& id, std::vector<ChunkId> antecedents, ChunkKV kv,
                          bool exact) {
  const size_t bytes = kv.bytes() + antecedents.size() * sizeof(ChunkId);
  if (bytes > params_.byte_budget) return;
  std::vector<Lru::iterator>& of = by_id_[id];
  for (auto it : of)
    if (it->antecedents == antecedents) {
      erase(it);
      break;
    }
  std::vector<Lru::iterator>& now = by_id_[id];  // erase may have dropped the vector
  while (int(now.size()) >= std::max(1, params_.per_segment)) {
    auto oldest = std::min_element(now.begin(), now.end(), [](Lru::iterator x, Lru::iterator y) {
      return x->last_use < y->last_use;
    });
    erase(*oldest);
    ++stats_.evictions;
    if (!by_id_.count(id)) break;
  }
  lru_.push_front({id, std::move(antecedents), std::make_shared<const ChunkKV>(std::move(kv)),
                   nullptr, nullptr, bytes, exact, ++clock_});
  by_id_[id].push_back(lru_.begin());
  bytes_ += bytes;
  tell(id, bytes, true);
  shrink_to(params_.byte_budget);
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
  Hit h{best->kv, best->canonical, best->patch,
        latest  ? Match::Latest
        : exact ? Match::Exact
                : Match::Nearest,
        best_shared};
  ++(h.match == Match::Exact     ? stats_.exact
     : h.match == Match::Nearest ? stats_.nearest
                                 : stats_.latest);
  best->last_use = ++clock_;
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
    if (!it->kv) continue;
    KAMERA_ASSIGN_OR_RETURN(Patch p, factor(*it->kv, canonical->kv));
    if (factored) factored(it->antecedents, p);
    const size_t bytes = p.bytes() + it->antecedents.size() * sizeof(ChunkId);
    if (bytes >= it->bytes) continue;  // the rows are no bigger: kept, exact
    tell(id, it->bytes, false);
    tell(id, bytes, true);
    bytes_ = bytes_ - it->bytes + bytes;
    it->bytes = bytes;
    it->kv.reset();
    it->canonical = canonical;
    it->patch = std::make_shared<const Patch>(std::move(p));
    ++n;
  }
  stats_.compacted += n;
  return n;
}

void SegmentIndex::shrink_to(size_t bytes) {
  while (bytes_ > bytes && !lru_.empty()) {
    erase(std::prev(lru_.end()));
    ++stats_.evictions;
  }
}

SegmentIndex::Stats SegmentIndex::stats() const {
  Stats s = stats_;
  s.occurrences = int64_t(lru_.size());
  s.bytes = int64_t(bytes_);
  return s;
}

}  // namespace kamera
