// PromptAssembler's assembly of a plan: the exact prefix, the segments held, the prefill between
// (cache/prompt_assembler.h).
#include "cache/prompt_assembler.h"

#include <algorithm>
#include <chrono>

#include "cache/repair_plan.h"

namespace kamera {

namespace {

double seconds_now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Rows from their context (context-*), or the canonical plus that context's patch (patch-*).
SpanSource hit_source(const SegmentIndex::Hit& h) {
  const bool rows = h.rows != nullptr;
  if (h.match == SegmentIndex::Match::Orbit) return SpanSource::ContextOrbit;
  return h.match == SegmentIndex::Match::Exact
             ? (rows ? SpanSource::ContextExact : SpanSource::PatchExact)
         : h.match == SegmentIndex::Match::Nearest
             ? (rows ? SpanSource::ContextNearest : SpanSource::PatchNearest)
             : SpanSource::Keep;
}

// A segment from the shared tiers: with the patch of the request's own context, or the nearest.
SpanSource store_source(const SegmentIndex::Hit& h) {
  return h.match == SegmentIndex::Match::Exact ? SpanSource::StorePatch
                                               : SpanSource::StorePatchNearest;
}

using enum Assembly::Served;

}  // namespace

PromptAssembler::PromptAssembler(ChunkCache& cache, AssemblerOptions o) : cache_(cache), opts_(o) {
  KvPool& pool = cache_.pool();
  const int64_t page = pool.page_tokens();
  prefix_budget_ = opts_.prefix_cache_tokens >= 0 ? opts_.prefix_cache_tokens
                                                  : int64_t(pool.n_pages()) * page / 4;
  prefix_budget_ = std::max<int64_t>(prefix_budget_, 0);
  // The segments' share: their bytes in pool pages, at most a quarter of the pool (-1: that).
  const int64_t page_bytes = std::max<int64_t>(1, int64_t(pool.arena_bytes()) / pool.n_pages());
  const int64_t quarter = pool.n_pages() / 4;
  segment_pages_ = opts_.segment_cache_bytes < 0
                       ? quarter
                       : std::min(quarter, opts_.segment_cache_bytes / page_bytes);
  // One budget over both kinds (cache/cached_pages.h): either may use all of it.
  budget_pages_ =
      (prefix_budget_ + page - 1) / page + (opts_.segment_cache_bytes != 0 ? segment_pages_ : 0);
  // A bounded pool's entries keep their last window of local rows (cache/prefix_index.h).
  const int window = pool.bounded_window() ? cache_.model().cfg.layer_kinds.window : 0;
  if (prefix_budget_ > 0)
    prefix_ = std::make_unique<PrefixIndex>(
        pool,
        PrefixIndex::Params{pool.page_tokens(), budget_pages_ * page, window, opts_.window_entries},
        &cached_);
  if (opts_.segment_cache_bytes != 0)
    segments_ =
        std::make_unique<SegmentIndex>(pool, SegmentIndex::Params{budget_pages_, 4}, &cached_);
}

int64_t PromptAssembler::cached_pages() const {
  return cached_.pages() + (segments_ ? segments_->patch_pages() : 0);
}

PromptAssembler::CachedStats PromptAssembler::cached_stats() const {
  const KvPool& pool = cache_.pool();
  CachedStats c;
  c.budget_pages = budget_pages_;
  c.page_bytes = std::max<int64_t>(1, int64_t(pool.arena_bytes()) / pool.n_pages());
  if (prefix_) {
    c.prefix_pages = prefix_->tokens_held() / pool.page_tokens();
    c.evictions += prefix_->stats().evictions;
  }
  if (segments_) {
    c.patch_pages = segments_->patch_pages();
    c.segment_pages = segments_->pages_held() - c.patch_pages;
    c.evictions += segments_->stats().evictions;
  }
  const int64_t distinct = cached_.pages();  // each page once, whichever kinds hold it
  c.shared_pages = c.prefix_pages + c.segment_pages - distinct;
  c.pages = distinct + c.patch_pages;
  return c;
}

// Least recently used first across both indexes: the segment index's oldest occurrence goes
// whole; when the prefix index's oldest unpinned entry is older, that index gives back a page's
// worth of tails by its own order (cache/prefix_index.h). Pages another holder shares stay in the
// pool but are no longer counted once both let them go.
int64_t PromptAssembler::shrink_cached(int64_t pages) {
  const int64_t page = cache_.pool().page_tokens();
  bool prefix_stuck = false;  // the rest of the prefix index is pinned
  while (cached_pages() > pages) {
    const uint64_t s = segments_ ? segments_->oldest_use() : UINT64_MAX;
    const uint64_t p = prefix_ && !prefix_stuck ? prefix_->oldest_use() : UINT64_MAX;
    if (s == UINT64_MAX && p == UINT64_MAX) break;
    if (s < p) {
      segments_->evict_oldest();
      continue;
    }
    const int64_t held = prefix_->tokens_held();
    prefix_stuck = held == 0 || prefix_->shrink_to(held - page) >= held;
  }
  return cached_pages();
}

// No scheduler makes room for the library's callers (ChatSession, the C API): cached KV gives
// back the pages a prompt of `tokens` lacks (one more for the first generated token) before it is
// served. Pages another holder shares are not freed by this (cache/cached_pages.h).
void PromptAssembler::make_room(int64_t tokens) {
  const int64_t page = cache_.pool().page_tokens();
  const int64_t lack = (tokens + page) / page + 1 - cache_.pool().n_free_pages();
  if (lack > 0) shrink_cached(std::max<int64_t>(0, cached_pages() - lack));
}

// Prefills tokens [pending, end) of the plan behind what a.seq holds, segment by segment: a run
// of text in one forward, each image in its own (its rows at its (t, h, w) positions).
Status PromptAssembler::prefill_until(const PromptPlan& plan, Assembly& a, int& pending, int end) {
  const std::vector<int32_t>& ids = plan.ids;
  std::vector<int32_t> run;  // text tokens [run_at, pending) not yet forwarded
  int run_at = pending;
  int32_t run_pos = 0;
  auto flush = [&]() -> Status {
    if (run.empty()) return Status::Ok();
    auto r = cache_.forward_chunk(a.seq, ChunkContent::from_tokens(std::move(run)), run_pos);
    if (!r.ok()) return Error{ErrorCode::OutOfMemory, r.message()};
    report_run(plan, a, run_at, pending, run_pos);
    a.recomputed += pending - run_at;
    run.clear();
    return Status::Ok();
  };
  for (const PromptSegment& s : plan.segments) {
    if (s.span.end <= pending || s.span.begin >= end) continue;
    if (s.image) {
      KAMERA_TRY(flush());
      auto r = cache_.forward_chunk(a.seq, *s.image, s.position);
      if (!r.ok()) return Error{ErrorCode::OutOfMemory, r.message()};
      a.spans.push_back({s.id, s.span.size(), s.position, SpanSource::Recomputed, -1, true});
      if (const size_t i = size_t(&s - plan.segments.data()); i < a.repair.size())
        a.spans.back().repaired = (a.spans.back().repair_estimate = a.repair[i]) >= 0;
      a.recomputed += s.span.size();
      pending = run_at = s.span.end;
      continue;
    }
    const int from = std::max(pending, s.span.begin), to = std::min(end, s.span.end);
    if (run.empty()) run_at = from, run_pos = s.position + (from - s.span.begin);
    run.insert(run.end(), ids.begin() + from, ids.begin() + to);
    pending = to;
  }
  if (plan.segments.empty() && pending < end) {  // no segments: the tokens as they are
    run_at = pending, run_pos = pending;
    run.assign(ids.begin() + pending, ids.begin() + end);
    pending = end;
  }
  return flush();
}

// Writes a hit's rows (or its canonical plus patch) at segment s's positions.
Status PromptAssembler::write_hit(const PromptSegment& s, SeqId seq, const SegmentIndex::Hit& h) {
  if (!h.rows) {
    Status st = cache_.append_chunk(seq, *h.canonical, h.patch.get(), s.position);
    return st.ok() ? st : Error{ErrorCode::OutOfMemory, st.message()};
  }
  std::vector<Pos> pos;
  if (s.image) {
    pos = s.image->positions_at(s.position);
  } else {
    for (int t = 0; t < s.span.size(); ++t) pos.push_back(Pos::linear(s.position + t));
  }
  auto at = cache_.pool().append(seq, pos);
  if (!at.ok()) return Error{ErrorCode::OutOfMemory, at.message()};
  h.rows->copy_to(seq, *at);  // pool to pool: no heap rows
  return Status::Ok();
}

void PromptAssembler::count_hit(const SegmentIndex::Hit& h, bool from_store) {
  using M = SegmentIndex::Match;
  if (from_store) {
    ++(h.match == M::Exact ? counters_.store_patch : counters_.store_patch_nearest);
    return;
  }
  ++(h.match == M::Orbit    ? counters_.context_orbit
     : h.match == M::Latest ? counters_.context_keep
     : !h.rows             ? (h.match == M::Exact ? counters_.patch_exact : counters_.patch_nearest)
     : h.match == M::Exact ? counters_.context_exact
                           : counters_.context_nearest);
}

// Past `pending` (the first token a.seq does not hold), each segment the index holds for this
// context is written from its stored KV at its position (or, when another server computed it,
// from the canonical and patch it stored in the shared tiers), but those the repair budget
// chooses (cache/repair_plan.h), prefilled in context as the tokens nothing held; the last
// segment is left to the query (its last token's logits are the first token's).
Status PromptAssembler::serve_segments(const PromptPlan& plan, Assembly& a, int& pending) {
  const bool latest = plan.policy == ReusePolicy::Keep;
  std::vector<ChunkId> ante;
  const std::vector<PromptSegment>& segs = plan.segments;
  const std::vector<std::optional<SegmentIndex::Hit>> fetched = fetch_segments(plan, pending);
  std::vector<std::optional<SegmentIndex::Hit>> hits(segs.size());
  std::vector<char> from_store(segs.size(), 0);
  for (size_t i = 0; i + 1 < segs.size(); ante.push_back(segs[i++].id)) {
    if (segs[i].span.begin < pending) continue;  // in the prefix
    SegmentIndex::Hit h = segments_->find(segs[i].id, ante, latest);
    from_store[i] = !h.found() && fetched[i].has_value();
    if (from_store[i]) h = *fetched[i];
    if (h.found()) hits[i] = std::move(h);
  }
  plan_repair(plan, hits, a);
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    const PromptSegment& s = segs[i];
    if (!hits[i] || (i < a.repair.size() && a.repair[i] >= 0)) continue;
    const SegmentIndex::Hit& h = *hits[i];
    KAMERA_TRY(prefill_until(plan, a, pending, s.span.begin));
    const double t0 = seconds_now();
    KAMERA_TRY(write_hit(s, a.seq, h));
    if (!h.rows) {  // rebuilt from a canonical and a patch: what a fetch costs past its bytes
      const double t = (seconds_now() - t0) / std::max(1, s.span.size());
      rebuild_s_ = rebuild_s_ > 0 ? 0.8 * rebuild_s_ + 0.2 * t : t;
    }
    const bool exact = h.match == SegmentIndex::Match::Exact && h.rows;
    a.served[i] = from_store[i] ? ServedStore : exact ? ServedExact : ServedNear;
    a.reused += s.span.size();
    pending = s.span.end;
    a.spans.push_back({s.id, s.span.size(), s.position,
                       from_store[i] ? store_source(h) : hit_source(h), h.shared,
                       s.image != nullptr});
    if (!exact) a.spans.back().repair_estimate = deficit_estimate(h, i);
    count_hit(h, from_store[i]);
  }
  return Status::Ok();
}

// Where the exact prefix is cut: a prefix that ends inside an image, or (with segment reuse)
// inside a segment the index holds, ends at that segment's start instead (the segment is then
// served whole, not recomputed from the middle).
int PromptAssembler::prefix_cut(const PromptPlan& plan, int n_tokens, bool segment_reuse) const {
  const std::vector<PromptSegment>& segs = plan.segments;
  for (const PromptSegment& s : segs) {
    if (s.span.end <= n_tokens) continue;
    if (s.span.begin >= n_tokens) break;
    const bool held = segment_reuse && &s != &segs.back() && segments_->contains(s.id);
    return s.image || held ? s.span.begin : n_tokens;
  }
  return n_tokens;
}

// The exact prefix [anchor, n) in a's spans: its text as runs of source "prefix", each image in
// it as a span of its own (its id, media).
void PromptAssembler::report_prefix(const PromptPlan& plan, Assembly& a, int anchor, int n) const {
  int from = anchor;
  int32_t at = anchor;  // the position of token `from`
  for (const PromptSegment& s : plan.segments) {
    if (!s.image || s.span.end > n) continue;  // (the prefix never ends inside an image)
    if (s.span.begin > from)
      a.spans.push_back({std::nullopt, s.span.begin - from, at, SpanSource::Prefix});
    a.spans.push_back({s.id, s.span.size(), s.position, SpanSource::Prefix, -1, true});
    from = s.span.end;
    at = s.position + int32_t(s.image->extent());
  }
  if (n > from) a.spans.push_back({std::nullopt, n - from, at, SpanSource::Prefix});
}

Result<bool> PromptAssembler::assemble(const PromptPlan& plan, Assembly& a) {
  const std::vector<int32_t>& all = plan.ids;
  a.served.assign(plan.segments.size(), NotServed);
  const ReusePolicy policy = plan.policy;
  const int anchor = int(cache_.anchor_extent());
  if (int(all.size()) <= anchor || policy == ReusePolicy::Reprefill) return false;
  const bool images = plan.has_media();
  if (images && plan.segments.back().image) return false;  // the query must be text
  const PrefixIndex::Match m =
      prefix_ ? prefix_->lookup(std::span(all).first(all.size() - 1), approximate_prefix(policy))
              : PrefixIndex::Match{};
  const bool segment_reuse = segments_ && policy != ReusePolicy::Prefix &&
                             policy != ReusePolicy::Blind && plan.segments.size() > 1;
  int n = prefix_cut(plan, m.n_tokens, segment_reuse);
  if (n < m.n_tokens && n > anchor && !prefix_->resumable(m.entry, n)) n = anchor;  // (window)
  if (n > anchor) {
    auto fork = prefix_->fork_prefix(m.entry, n);
    if (!fork.ok()) return false;
    a.seq = *fork;
    a.prefix_end = n;
    a.prefix_exact = std::min(n, m.exact);
    report_prefix(plan, a, anchor, n);
    if (a.prefix_exact < n) mark_approximate_prefix(a.spans, anchor, a.prefix_exact);
    counters_.prefix_approximate += a.prefix_exact < n;
    ++counters_.prefix;
    a.reused = n - anchor;
  } else if (segment_reuse) {
    a.seq = cache_.pool().create_sequence();
    KAMERA_TRY(cache_.append_anchor(a.seq));
    a.prefix_end = a.prefix_exact = anchor;
  } else {
    return false;
  }
  int pending = a.prefix_end;
  if (segment_reuse) KAMERA_TRY(serve_segments(plan, a, pending));
  // The query: the last segment (text) from `pending`, the rest prefilled before it; a prompt of
  // text only keeps its tokens from `pending` whole (one forward, as a cold run).
  const PromptSegment* last = plan.segments.empty() ? nullptr : &plan.segments.back();
  // (segments the repair budget chose are prefilled before it, so that each is reported)
  const int from =
      std::max(images && last ? std::max(pending, last->span.begin) : pending, repair_end(plan, a));
  KAMERA_TRY(prefill_until(plan, a, pending, from));
  a.query_pos = last ? last->position + (from - last->span.begin) : from;
  a.query = ChunkContent::from_tokens({all.begin() + from, all.end()});
  return true;
}

// The plan served from the caches, or whole as the query when they hold none of it; then the
// query's forward (cache/prompt_assembler.h).
Result<std::vector<float>> PromptAssembler::serve(const PromptPlan& plan, Assembly& a) {
  make_room(int64_t(plan.ids.size()));
  auto served = assemble(plan, a);
  if (!served.ok()) return served.error();
  if (!*served) {
    a = Assembly{};
    a.seq = cache_.pool().create_sequence();
    a.query = ChunkContent::from_tokens(plan.ids);
  }
  return cache_.forward_chunk(a.seq, a.query, a.query_pos, LogitsMode::Last);
}

PrefixIndex::Match PromptAssembler::held_prefix(const PromptPlan& plan) const {
  const std::vector<int32_t>& ids = plan.ids;
  if (!prefix_ || ids.size() < 2) return {};
  return prefix_->best_match(std::span(ids).first(ids.size() - 1), approximate_prefix(plan.policy));
}

// Of the plans being admitted, the one where waiting pays (cache/prompt_assembler.h).
int64_t PromptAssembler::shared_in_flight(const PromptPlan& plan,
                                          std::span<const PromptPlan* const> busy) const {
  const std::vector<int32_t>& ids = plan.ids;
  if (busy.empty() || ids.size() < 2 || plan.policy == ReusePolicy::Reprefill) return 0;
  const size_t held = size_t(held_prefix(plan).n_tokens);
  const bool by_segment =
      segments_ && plan.policy != ReusePolicy::Prefix && plan.policy != ReusePolicy::Blind;
  int64_t best = 0;
  for (const PromptPlan* b : busy) {
    const std::vector<int32_t>& o = b->ids;
    const size_t n = std::min(ids.size() - 1, o.size());
    const size_t common =
        prefix_
            ? size_t(std::mismatch(ids.begin(), ids.begin() + std::ptrdiff_t(n), o.begin()).first -
                     ids.begin())
            : 0;
    int64_t shared = common > held ? int64_t(common - held) : 0;
    const std::vector<PromptSegment>& segs = plan.segments;
    for (size_t i = 0; by_segment && i + 1 < segs.size(); ++i) {
      const PromptSegment& s = segs[i];
      if (size_t(s.span.end) <= std::max(common, held) || s.image || segments_->contains(s.id))
        continue;
      for (const PromptSegment& t : b->segments)
        if (t.id == s.id && !t.image) {
          shared += s.span.size();
          break;
        }
    }
    if (o.size() <= ids.size() + size_t(shared)) best = std::max(best, shared);
  }
  return best;
}

}  // namespace kamera
