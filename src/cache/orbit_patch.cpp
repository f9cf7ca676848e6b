// ChunkCache::orbit_patch: one patch for every ordering of a cached set (paper §5, reorder): the
// mean deficit over the set's orderings (all of them, or a seeded sample without repeats).
#include "cache/chunk_cache.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

namespace kamera {

Result<std::shared_ptr<const PatchEntry>> ChunkCache::orbit_patch(std::span<const ChunkContent> set,
                                                                  const ChunkContent& chunk,
                                                                  const PatchOptions& opts,
                                                                  int max_orderings) {
  std::vector<ChunkId> ids;
  for (const auto& c : set) ids.push_back(id_of(c));
  std::vector<ChunkId> sorted = ids;
  std::sort(sorted.begin(), sorted.end(), [](const ChunkId& a, const ChunkId& b) {
    return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
  });
  const PatchOptions o = stored_options(opts);
  PatchKey key = PatchKey::make(id_of(chunk), sorted, o);
  key.orbit = true;
  if (auto hit = store_.find_patch(key)) return hit;
  auto canon = canonical(chunk);
  if (!canon.ok()) return canon.error();
  // Orderings of the set: all permutations, or a seeded sample without repeats.
  std::vector<int> perm(set.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<std::vector<int>> orderings;
  double total = 1;
  for (size_t i = 2; i <= set.size(); ++i) total *= double(i);
  if (total <= max_orderings) {
    do orderings.push_back(perm);
    while (std::next_permutation(perm.begin(), perm.end()));
  } else {
    std::mt19937 rng(uint32_t(key.chunk.lo));
    std::set<std::vector<int>> seen;
    while (int(orderings.size()) < max_orderings) {
      std::shuffle(perm.begin(), perm.end(), rng);
      if (seen.insert(perm).second) orderings.push_back(perm);
    }
  }
  std::vector<ChunkKV> conds;
  for (const auto& ord : orderings) {
    std::vector<ChunkContent> seq;
    for (int i : ord) seq.push_back(set[i]);
    seq.push_back(chunk);
    auto cd = conditioned(seq);
    if (!cd.ok()) return cd.error();
    conds.push_back(std::move(cd->back()));
  }
  std::vector<const ChunkKV*> ptrs;
  for (const auto& c : conds) ptrs.push_back(&c);
  auto p = form_patch_mean(ptrs, (*canon)->kv, o);
  if (!p.ok()) return p.error();
  auto e = std::make_shared<PatchEntry>();
  e->key = key;
  e->patch = std::move(p.value());
  store_.put_patch(e);
  return std::shared_ptr<const PatchEntry>(e);
}

}  // namespace kamera
