// PromptAssembler's memory: what an assembled prompt leaves for the next ones (its tokens in the
// prefix index, its segments in the segment index) and the canonicals of long segments formed off
// the request path (cache/prompt_assembler.h).
#include <algorithm>

#include "cache/prompt_assembler.h"
#include "core/log.h"

namespace kamera {

namespace {

using enum Assembly::Served;

// Segment s's content: its image, or its tokens.
std::shared_ptr<const ChunkContent> content_of(const PromptPlan& p, const PromptSegment& s) {
  if (s.image) return s.image;
  const auto first = p.ids.begin() + s.span.begin;
  return std::make_shared<const ChunkContent>(
      ChunkContent::from_tokens({first, first + s.span.size()}));
}

// Tokens of the plan from the start whose rows in the assembled sequence are a cold run's: up to
// the approximate part of the prefix it was served, or the first segment served from another
// context (the rest, and a reply decoded behind them, are approximate); -1: all of them.
int exact_extent(const PromptPlan& plan, const Assembly& a) {
  const int exact = a.prefix_exact < a.prefix_end ? a.prefix_exact : -1;
  for (size_t i = 0; i < a.served.size() && i < plan.segments.size(); ++i) {
    if (a.served[i] != ServedNear && a.served[i] != ServedStore) continue;
    const int begin = plan.segments[i].span.begin;
    return exact < 0 ? begin : std::min(exact, begin);
  }
  return exact;
}

}  // namespace

void PromptAssembler::remember(const PromptPlan& plan, const Assembly& a, SeqId seq,
                               std::span<const int32_t> reply) {
  if (!prefix_ || int(plan.ids.size()) <= cache_.anchor_extent() || seq < 0) return;
  const int held = cache_.pool().n_tokens(seq), prompt = int(plan.ids.size());
  std::vector<int32_t> tokens = plan.ids;
  const int exact = exact_extent(plan, a);
  if (!reply.empty()) {
    if (held < prompt || held - prompt > int(reply.size())) return;  // not the tokens it holds
    tokens.insert(tokens.end(), reply.begin(), reply.begin() + (held - prompt));
  }
  if (held < int(tokens.size())) return;
  auto r = prefix_->insert(seq, tokens, exact);
  if (!r.ok()) log().warn("prefix index: {}", r.message());
  shrink_cached(budget_pages_);
}

// Keeps the conditioned KV of every segment this prompt computed (in whole or in part: not those
// of the exact prefix, kept when they were computed, nor those served from the index) or fetched
// from the store (another server's, marked not exact), with the ids of the segments before it and
// whether all of those were exact; long ones are queued for a canonical (compact_one).
void PromptAssembler::keep_segments(const PromptPlan& plan, Assembly& a, SeqId seq) {
  if (!segments_ || a.kept || seq < 0) return;
  if (cache_.pool().n_tokens(seq) < int(plan.ids.size())) return;
  a.kept = true;
  if (a.served.size() != plan.segments.size()) a.served.assign(plan.segments.size(), NotServed);
  std::vector<ChunkId> ante;
  bool exact = a.prefix_exact >= a.prefix_end;  // every segment so far holds a re-prefill's rows
  for (size_t i = 0; i < plan.segments.size(); ++i) {
    const PromptSegment& s = plan.segments[i];
    const char served = a.served[i];
    if ((served == NotServed || served == ServedStore) && s.span.end > a.prefix_end) {
      // A fork of seq's pages holding the segment's tokens: no row copied.
      const Status st = segments_->insert(s.id, ante, seq, s.span.begin, s.span.size(),
                                          exact && served == NotServed);
      if (!st.ok()) log().warn("segment index: {}", st.message());
      const bool worth =
          served == NotServed && opts_.compact_tokens > 0 && s.span.size() >= opts_.compact_tokens;
      if (worth && to_compact_.size() < opts_.compact_queue &&
          compact_queued_.insert(s.id).second) {
        to_compact_.push_back({s.id, content_of(plan, s)});
        ++a.background_queued;
      }
    }
    exact = exact && served != ServedNear && served != ServedStore;
    ante.push_back(s.id);
  }
  shrink_cached(budget_pages_);
  queue_repairs(plan, a);
}

bool PromptAssembler::background_room() const {
  const KvPool& pool = cache_.pool();
  const int64_t page = pool.page_tokens();
  const int64_t need = 2 * ((cache_.context_length() + page - 1) / page + 1);
  return pool.n_free_pages() >= need;
}

PatchOptions PromptAssembler::compact_patch_options() const {
  PatchOptions po;
  po.rank = opts_.compact_rank;
  po.cap_rank = true;
  return po;
}

// C_B = KV(B | anchor) of the oldest queued segment (one forward of [anchor · B]), then each of
// its occurrences keeps the patch of its deficit where that is smaller than its rows.
void PromptAssembler::compact_one() {
  if (to_compact_.empty()) return;
  const ChunkId id = to_compact_.front().first;  // a plain variable: the lambdas below capture it
  const auto content = std::move(to_compact_.front().second);
  to_compact_.pop_front();
  compact_queued_.erase(id);
  if (!segments_ || !segments_->contains(id)) return;  // evicted meanwhile
  bool formed = false;
  auto canon = cache_.canonical(*content, DType::F32, &formed);
  if (!canon.ok()) return log().warn("background canonical: {}", canon.message());
  counters_.background_canonicals += formed;
  const PatchOptions po = compact_patch_options();
  // Each context's patch is stored too (through to the shared tiers): another server that meets
  // the segment in the same context serves it from there (fetch_segments) instead of a forward.
  auto n = segments_->compact(
      id, *canon,
      [&](const ChunkKV& rows, const ChunkKV& base) { return form_patch(rows, base, po); },
      [&](std::span<const ChunkId> ante, const Patch& p) {
        cache_.store().put_patch(std::make_shared<const PatchEntry>(PatchEntry{
            PatchKey::make(id, ante, po), p, std::vector<ChunkId>(ante.begin(), ante.end())}));
      });
  if (!n.ok()) return log().warn("background patch: {}", n.message());
  counters_.background_patches += *n;
}

}  // namespace kamera
