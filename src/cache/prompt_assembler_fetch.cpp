// PromptAssembler's fetch from the shared tiers: segments the index misses that another server
// computed, served from the canonical and the patch it stored, when that is estimated cheaper than
// a forward (cache/prompt_assembler.h).
#include <algorithm>

#include "cache/prompt_assembler.h"

namespace kamera {

namespace {

// Of the contexts a segment's patches were stored with, the request's own, else the one sharing
// the most antecedents with it in order (ties: the first listed), as the segment index picks.
// With none listed (tiers that keep no contexts: the disk), the request's own is asked for.
struct StoredContext {
  std::span<const ChunkId> ids;
  int shared = -1;    // antecedents in common with the request's
  bool same = false;  // the request's own context
};

StoredContext nearest_context(const StoreTier::Contexts& stored, std::span<const ChunkId> ante) {
  StoredContext best{ante, int(ante.size()), true};
  for (const std::vector<ChunkId>& c : stored) {
    if (std::equal(c.begin(), c.end(), ante.begin(), ante.end()))
      return {c, int(ante.size()), true};
    const int n = common_in_order(c, ante);
    if (best.same || n > best.shared) best = {c, n, false};
  }
  return best;
}

}  // namespace

// The break-even of a fetch: recomputing `tokens` costs the measured seconds of a prefill token
// each (token_s_); fetching `bytes` costs the tier's measured round trip and time per KiB, and
// then the measured seconds per token of rebuilding the rows from the canonical and the patch
// (rebuild_s_). Before the prefill or the tier is measured, fetch (a fetch is how the tier's cost
// gets measured).
bool PromptAssembler::fetch_worth(int64_t tokens, size_t bytes,
                                  const StoreTier::FetchCost& cost) const {
  if (opts_.fetch != AssemblerOptions::Fetch::Auto)
    return opts_.fetch == AssemblerOptions::Fetch::Always;
  if (token_s_ <= 0 || cost.samples == 0) return true;
  return cost.us(bytes) + double(tokens) * rebuild_s_ * 1e6 < double(tokens) * token_s_ * 1e6;
}

// For each segment past `pending` (but the last) that the index misses: its canonical and its
// context's patch from the store, fetched in one batch (nullopt: not fetched, or missing).
std::vector<std::optional<SegmentIndex::Hit>> PromptAssembler::fetch_segments(
    const PromptPlan& plan, int pending) {
  const std::vector<PromptSegment>& segs = plan.segments;
  std::vector<std::optional<SegmentIndex::Hit>> out(segs.size());
  ChunkStore& store = cache_.store();
  if (opts_.fetch == AssemblerOptions::Fetch::Never || store.tiers().empty() ||
      opts_.compact_tokens <= 0 || plan.policy == ReusePolicy::Keep)
    return out;
  StoreTier::FetchCost cost;
  for (const auto& t : store.tiers())
    if (t->remote()) cost = t->fetch_cost();
  // a canonical's rows: f32 KV of every channel per token, and a patch of about as much again
  const size_t row_bytes = cache_.model().kv_layout().floats_per_token() * sizeof(float);
  std::vector<size_t> asked;
  std::vector<ChunkId> ids;
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    const PromptSegment& s = segs[i];
    // only long segments get a canonical (and their contexts a patch) anywhere
    if (s.span.begin < pending || s.image || s.span.size() < opts_.compact_tokens ||
        segments_->contains(s.id))
      continue;
    if (!fetch_worth(s.span.size(), 2 * row_bytes * size_t(s.span.size()), cost)) {
      ++counters_.store_fetch_skipped;
      continue;
    }
    ids.push_back(s.id);
    asked.push_back(i);
  }
  if (asked.empty()) return out;
  // The contexts their patches were stored with (one round trip), then each one's canonical and
  // the patch of its own context, else of the nearest stored one (a second round trip).
  const std::vector<StoreTier::Contexts> stored = store.find_contexts(ids);
  StoreTier::Batch want;
  std::vector<StoredContext> chosen;
  std::vector<ChunkId> ante;  // the request's antecedents of segment asked[k]
  const PatchOptions po = compact_patch_options();
  for (size_t k = 0; k < asked.size(); ++k) {
    while (ante.size() < asked[k]) ante.push_back(segs[ante.size()].id);
    const StoredContext c = nearest_context(stored[k], ante);
    want.canonicals.push_back(ids[k]);
    want.patches.push_back(PatchKey::make(ids[k], c.ids, po));
    chosen.push_back({{}, c.shared, c.same});  // c.ids may view `ante`, which grows
  }
  ++counters_.store_fetch_batches;
  const StoreTier::BatchLoaded got = store.find_batch(want);
  for (size_t k = 0; k < asked.size(); ++k) {
    if (!got.canonicals[k] || !got.patches[k]) continue;
    SegmentIndex::Hit h;
    h.canonical = got.canonicals[k];
    h.patch = std::make_shared<const Patch>(got.patches[k]->patch);
    h.match = chosen[k].same ? SegmentIndex::Match::Exact : SegmentIndex::Match::Nearest;
    h.shared = chosen[k].shared;
    out[asked[k]] = h;
  }
  return out;
}

}  // namespace kamera
