// PromptAssembler's idle-time repair (cache/idle_repair.h): what an approximately served prompt
// leaves queued (its refresh; the orbits its segments now have orderings for) and the background
// work that forms them.
#include <algorithm>

#include "cache/prompt_assembler.h"
#include "core/log.h"

namespace kamera {

namespace {

using enum Assembly::Served;

constexpr size_t kMaxOrbitMembers = 24;  // orderings averaged at most (the most recent)

}  // namespace

// After keep_segments: a prompt with a segment from another context is queued for its refresh;
// every segment whose antecedent set the index now holds in more orderings than its orbit was
// formed over (two at least) is queued for its orbit.
void PromptAssembler::queue_repairs(const PromptPlan& plan, const Assembly& a) {
  if (!opts_.idle_repair || !segments_) return;
  const bool approximate = std::any_of(a.served.begin(), a.served.end(),
                                       [](char s) { return s == ServedNear || s == ServedStore; });
  if (approximate && plan.policy != ReusePolicy::Keep) repair_.queue_refresh(plan);
  std::vector<ChunkId> set;  // the antecedents so far, kept sorted (as sorted_ids sorts)
  for (const PromptSegment& s : plan.segments) {
    if (set.size() >= 2 && segments_->contains(s.id)) {
      const size_t n = segments_->orderings(s.id, set).size();
      if (n >= 2 && int(std::min(n, kMaxOrbitMembers)) > segments_->orbit_members(s.id, set))
        repair_.queue_orbit(s.id, set);
    }
    set.insert(std::upper_bound(set.begin(), set.end(), s.id,
                                [](const ChunkId& a, const ChunkId& b) {
                                  return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
                                }),
               s.id);
  }
}

void PromptAssembler::background_one() {
  if (!to_compact_.empty()) return compact_one();
  if (!opts_.idle_repair || !segments_) return;
  if (auto plan = repair_.next_refresh()) {
    const Status st = refresh(*plan);
    if (!st.ok()) log().warn("background refresh: {}", st.message());
    return;
  }
  if (auto o = repair_.next_orbit()) {
    auto r = form_orbit(o->id, o->set);
    if (!r.ok()) log().warn("background orbit: {}", r.message());
  }
}

// The plan prefilled as assemble prefills what it does not reuse (the anchor, then its runs of
// text and its images in order), then kept as any prompt that reused nothing: its segments exact,
// its tokens in the prefix index (its own insert; remember() is the request path's).
Status PromptAssembler::refresh(const PromptPlan& plan) {
  KvPool& pool = cache_.pool();
  const int anchor = int(cache_.anchor_extent());
  if (int(plan.ids.size()) <= anchor || plan.segments.empty()) return Status::Ok();
  Assembly a;
  a.seq = pool.create_sequence();
  a.served.assign(plan.segments.size(), NotServed);
  a.prefix_end = a.prefix_exact = anchor;  // nothing reused: every row is a cold run's
  Status st = cache_.append_anchor(a.seq);
  int pending = anchor;
  if (st.ok()) st = prefill_until(plan, a, pending, int(plan.ids.size()));
  if (st.ok()) {
    keep_segments(plan, a, a.seq);
    if (prefix_) {
      auto r = prefix_->insert(a.seq, plan.ids);
      if (!r.ok()) log().warn("prefix index: {}", r.message());
    }
    shrink_cached(budget_pages_);
    ++counters_.background_refreshes;
  }
  pool.free_sequence(a.seq);  // what was kept holds forks of its pages
  return st;
}

// The mean of the rows of the exact orderings held (up to kMaxOrbitMembers, the most recent); a
// compacted ordering's rows are rebuilt from its canonical and patch first, in a sequence of their
// own.
Result<bool> PromptAssembler::form_orbit(const ChunkId& id, const std::vector<ChunkId>& set) {
  if (!segments_) return false;
  std::vector<SegmentIndex::Ordering> ords = segments_->orderings(id, set);
  if (ords.size() > kMaxOrbitMembers) ords.resize(kMaxOrbitMembers);
  if (ords.size() < 2 || int(ords.size()) <= segments_->orbit_members(id, set)) return false;
  KvPool& pool = cache_.pool();
  std::vector<SeqId> members, rebuilt;
  auto free_rebuilt = [&] {
    for (SeqId s : rebuilt) pool.free_sequence(s);
  };
  for (const SegmentIndex::Ordering& o : ords) {
    if (o.hit.rows) {  // held by `ords` until the end
      members.push_back(o.hit.rows->seq());
      continue;
    }
    const SeqId s = pool.create_sequence();
    rebuilt.push_back(s);
    const Status st = cache_.append_chunk(s, *o.hit.canonical, o.hit.patch.get(), 0);
    if (!st.ok()) {
      free_rebuilt();
      return st.error();
    }
    members.push_back(s);
  }
  auto mean = mean_rows(pool, members);
  free_rebuilt();
  if (!mean.ok()) return mean.error();
  KAMERA_TRY(segments_->insert_orbit(id, set, *mean, int(members.size())));
  ++counters_.background_orbits;
  shrink_cached(budget_pages_);
  return true;
}

}  // namespace kamera
