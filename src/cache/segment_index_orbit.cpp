// SegmentIndex's orbit occurrences (cache/segment_index.h): one occurrence per (segment,
// antecedent set) holding the mean rows of the orderings of that set the segment was seen behind,
// served to an ordering not seen. Formed off the request path (cache/idle_repair.h).
#include <algorithm>

#include "cache/segment_index.h"

namespace kamera {

namespace {

// An order-free key of a list of ids (a sum of mixed ids): two orderings of one multiset have the
// same; lists of different multisets almost never do (checked exactly after).
uint64_t orbit_set_key(std::span<const ChunkId> ids) {
  uint64_t k = 0;
  for (const ChunkId& c : ids) {
    uint64_t x = c.hi * 0x9e3779b97f4a7c15ull ^ (c.lo + 0x632be59bd9b4e019ull);
    x ^= x >> 31;
    k += x * 0xbf58476d1ce4e5b9ull;
  }
  return k;
}

}  // namespace

std::vector<ChunkId> sorted_ids(std::span<const ChunkId> ids) {
  std::vector<ChunkId> out(ids.begin(), ids.end());
  std::sort(out.begin(), out.end(), [](const ChunkId& a, const ChunkId& b) {
    return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
  });
  return out;
}

SegmentIndex::Lru::iterator SegmentIndex::orbit_of(const ChunkId& id,
                                                   std::span<const ChunkId> set) const {
  auto found = by_id_.find(id);
  if (found == by_id_.end()) return const_cast<Lru&>(lru_).end();
  for (Lru::iterator it : found->second)
    if (it->orbit &&
        std::equal(it->antecedents.begin(), it->antecedents.end(), set.begin(), set.end()))
      return it;
  return const_cast<Lru&>(lru_).end();
}

std::vector<SegmentIndex::Ordering> SegmentIndex::orderings(const ChunkId& id,
                                                            std::span<const ChunkId> set) const {
  std::vector<Ordering> out;
  auto found = by_id_.find(id);
  if (found == by_id_.end()) return out;
  std::vector<Lru::iterator> its;
  const uint64_t key = orbit_set_key(set);
  for (Lru::iterator it : found->second) {
    if (it->orbit || !it->exact || it->antecedents.size() != set.size() ||
        orbit_set_key(it->antecedents) != key)
      continue;
    const std::vector<ChunkId> s = sorted_ids(it->antecedents);
    if (std::equal(s.begin(), s.end(), set.begin(), set.end())) its.push_back(it);
  }
  std::sort(its.begin(), its.end(),
            [](Lru::iterator a, Lru::iterator b) { return a->last_use > b->last_use; });
  for (Lru::iterator it : its)
    out.push_back(
        {it->antecedents, {it->rows, it->canonical, it->patch, Match::Exact, int(set.size())}});
  return out;
}

int SegmentIndex::orbit_members(const ChunkId& id, std::span<const ChunkId> set) const {
  const Lru::iterator o = orbit_of(id, set);
  return o == lru_.end() ? 0 : o->orbit;
}

Status SegmentIndex::insert_orbit(const ChunkId& id, std::vector<ChunkId> set, SeqId seq,
                                  int members) {
  if (!pool_.has_sequence(seq))
    return make_error(ErrorCode::NotFound, "segment index: unknown sequence {}", seq);
  auto rows = std::make_shared<const Rows>(pool_, seq);  // the index's now: freed when dropped
  if (members < 2 || int64_t(rows->pages().size()) > params_.page_budget) return Status::Ok();
  if (Lru::iterator old = orbit_of(id, set); old != lru_.end()) erase(old);
  lru_.push_front({id, std::move(set), std::move(rows), nullptr, nullptr, 0, false, tick()});
  lru_.front().orbit = members;
  by_id_[id].push_back(lru_.begin());
  hold(lru_.front());
  tell(id, bytes_of(lru_.front()), true);
  shrink_to(params_.page_budget);
  return Status::Ok();
}

}  // namespace kamera
