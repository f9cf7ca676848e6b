// The scheduler's admission of text prompts: the longest exact token prefix the prefix index
// holds (a copy-on-write fork of its pages), then, past it, every segment of the prompt the
// segment index holds, written at its new position from the KV it was computed with in an earlier
// context (cache/segment_index.h); the tokens between are prefilled in order. After the prefill
// the prompt and the segments it computed are kept for the next requests (serve/scheduler.h).
#include <algorithm>

#include "core/log.h"
#include "serve/scheduler.h"

namespace kamera {

namespace {

// Rows from their context (context-*), or the canonical plus that context's patch (patch-*).
SpanSource hit_source(const SegmentIndex::Hit& h) {
  const bool rows = h.kv != nullptr;
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

// ServedStore: from the canonical and patch another server stored (kept in the index afterwards,
// as a segment computed here, so that this server's events say it holds it; not exact).
enum Served : char { NotServed = 0, ServedExact = 1, ServedNear = 2, ServedStore = 3 };

// Segment s's content: its image, or its tokens.
std::shared_ptr<const ChunkContent> content_of(const GenRequest& r, const PromptSegment& s) {
  if (s.image) return s.image;
  const auto first = r.prompt_ids.begin() + s.span.begin;
  return std::make_shared<const ChunkContent>(
      ChunkContent::from_tokens({first, first + s.span.size()}));
}

}  // namespace

// Prefills tokens [pending, end) of the prompt behind what g.seq holds, segment by segment: a run
// of text in one forward, each image in its own (its rows at its (t, h, w) positions).
Status Scheduler::prefill_until(Generation& g, Admission& a, int& pending, int end) {
  const std::vector<int32_t>& ids = g.req.prompt_ids;
  std::vector<int32_t> run;  // text tokens [run_at, pending) not yet forwarded
  int run_at = pending;
  int32_t run_pos = 0;
  auto flush = [&]() -> Status {
    if (run.empty()) return Status::Ok();
    auto r = ctx_.cache().forward_chunk(g.seq, ChunkContent::from_tokens(std::move(run)), run_pos);
    if (!r.ok()) return Error{ErrorCode::OutOfMemory, r.message()};
    a.segments.push_back({std::nullopt, pending - run_at, run_pos, SpanSource::Recomputed});
    a.recomputed += pending - run_at;
    run.clear();
    return Status::Ok();
  };
  for (const PromptSegment& s : g.req.segments) {
    if (s.span.end <= pending || s.span.begin >= end) continue;
    if (s.image) {
      KAMERA_TRY(flush());
      auto r = ctx_.cache().forward_chunk(g.seq, *s.image, s.position);
      if (!r.ok()) return Error{ErrorCode::OutOfMemory, r.message()};
      a.segments.push_back({s.id, s.span.size(), s.position, SpanSource::Recomputed, -1, true});
      a.recomputed += s.span.size();
      pending = run_at = s.span.end;
      continue;
    }
    const int from = std::max(pending, s.span.begin), to = std::min(end, s.span.end);
    if (run.empty()) run_at = from, run_pos = s.position + (from - s.span.begin);
    run.insert(run.end(), ids.begin() + from, ids.begin() + to);
    pending = to;
  }
  if (g.req.segments.empty() && pending < end) {  // no segments: the tokens as they are
    run_at = pending, run_pos = pending;
    run.assign(ids.begin() + pending, ids.begin() + end);
    pending = end;
  }
  return flush();
}

// Writes a hit's rows (or its canonical plus patch) at segment s's positions.
Status Scheduler::write_hit(Generation& g, const PromptSegment& s, const SegmentIndex::Hit& h) {
  if (!h.kv) {
    Status st = ctx_.cache().append_chunk(g.seq, *h.canonical, h.patch.get(), s.position);
    return st.ok() ? st : Error{ErrorCode::OutOfMemory, st.message()};
  }
  std::vector<Pos> pos;
  if (s.image) {
    pos = s.image->positions_at(s.position);
  } else {
    for (int t = 0; t < s.span.size(); ++t) pos.push_back(Pos::linear(s.position + t));
  }
  auto at = ctx_.pool().append(g.seq, pos);
  if (!at.ok()) return Error{ErrorCode::OutOfMemory, at.message()};
  write_chunk_kv(*h.kv, ctx_.pool(), g.seq, *at);
  return Status::Ok();
}

PatchOptions Scheduler::compact_patch_options() const {
  PatchOptions po;
  po.rank = opts_.compact_rank;
  po.cap_rank = true;
  return po;
}

// The break-even of a fetch: recomputing `tokens` costs the measured seconds of a prefill token
// each (token_s_); fetching `bytes` costs the tier's measured round trip and time per KiB, and
// then the measured seconds per token of rebuilding the rows from the canonical and the patch
// (rebuild_s_). Before the prefill or the tier is measured, fetch (a fetch is how the tier's cost
// gets measured).
bool Scheduler::fetch_worth(int64_t tokens, size_t bytes, const StoreTier::FetchCost& cost) const {
  if (opts_.fetch != SchedulerOptions::Fetch::Auto)
    return opts_.fetch == SchedulerOptions::Fetch::Always;
  if (token_s_ <= 0 || cost.samples == 0) return true;
  return cost.us(bytes) + double(tokens) * rebuild_s_ * 1e6 < double(tokens) * token_s_ * 1e6;
}

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

std::vector<std::optional<SegmentIndex::Hit>> Scheduler::fetch_segments(Generation& g,
                                                                        int pending) {
  const std::vector<PromptSegment>& segs = g.req.segments;
  std::vector<std::optional<SegmentIndex::Hit>> out(segs.size());
  ChunkStore& store = ctx_.store();
  if (opts_.fetch == SchedulerOptions::Fetch::Never || store.tiers().empty() ||
      opts_.compact_tokens <= 0 || g.req.policy == ReusePolicy::Keep)
    return out;
  StoreTier::FetchCost cost;
  for (const auto& t : store.tiers())
    if (t->remote()) cost = t->fetch_cost();
  // a canonical's rows: f32 KV of every channel per token, and a patch of about as much again
  const size_t row_bytes = ctx_.model().kv_layout().floats_per_token() * sizeof(float);
  std::vector<size_t> asked;
  std::vector<ChunkId> ids;
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    const PromptSegment& s = segs[i];
    // only long segments get a canonical (and their contexts a patch) anywhere
    if (s.span.begin < pending || s.image || s.span.size() < opts_.compact_tokens ||
        segments_->contains(s.id))
      continue;
    if (!fetch_worth(s.span.size(), 2 * row_bytes * size_t(s.span.size()), cost)) {
      ++metrics_.store_fetch_skipped;
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
  ++metrics_.store_fetch_batches;
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

// Past `pending` (the first token g.seq does not hold), each segment the index holds for this
// context is written from its stored KV at its position (or, when another server computed it,
// from the canonical and patch it stored in the shared tiers); the last segment is left to the
// query (its last token's logits are the first token's).
Status Scheduler::serve_segments(Generation& g, Admission& a, int& pending) {
  const bool latest = g.req.policy == ReusePolicy::Keep;
  std::vector<ChunkId> ante;
  const std::vector<PromptSegment>& segs = g.req.segments;
  const std::vector<std::optional<SegmentIndex::Hit>> fetched = fetch_segments(g, pending);
  for (size_t i = 0; i + 1 < segs.size(); ante.push_back(segs[i++].id)) {
    const PromptSegment& s = segs[i];
    if (s.span.begin < pending) continue;  // in the prefix
    SegmentIndex::Hit h = segments_->find(s.id, ante, latest);
    const bool from_store = !h.found() && fetched[i].has_value();
    if (from_store) h = *fetched[i];
    if (!h.found()) continue;
    KAMERA_TRY(prefill_until(g, a, pending, s.span.begin));
    const double t0 = now_s();
    KAMERA_TRY(write_hit(g, s, h));
    if (!h.kv) {  // rebuilt from a canonical and a patch: what a fetch costs past its bytes
      const double t = (now_s() - t0) / std::max(1, s.span.size());
      rebuild_s_ = rebuild_s_ > 0 ? 0.8 * rebuild_s_ + 0.2 * t : t;
    }
    if (s.image && g.req.media) ++g.req.media->reused_chunks;
    const bool exact = h.match == SegmentIndex::Match::Exact && h.kv;
    g.segment_served[i] = from_store ? ServedStore : exact ? ServedExact : ServedNear;
    a.reused += s.span.size();
    pending = s.span.end;
    a.segments.push_back({s.id, s.span.size(), s.position,
                          from_store ? store_source(h) : hit_source(h), h.shared,
                          s.image != nullptr});
    if (from_store) {
      ++(h.match == SegmentIndex::Match::Exact ? metrics_.seg_store_patch
                                               : metrics_.seg_store_patch_nearest);
      continue;
    }
    ++(h.match == SegmentIndex::Match::Latest ? metrics_.seg_context_keep
       : !h.kv ? (h.match == SegmentIndex::Match::Exact ? metrics_.seg_patch_exact
                                                        : metrics_.seg_patch_nearest)
       : h.match == SegmentIndex::Match::Exact ? metrics_.seg_context_exact
                                               : metrics_.seg_context_nearest);
  }
  return Status::Ok();
}

// Where the exact prefix is cut: a prefix that ends inside an image, or (with segment reuse)
// inside a segment the index holds, ends at that segment's start instead (the segment is then
// served whole, not recomputed from the middle).
int Scheduler::prefix_cut(Generation& g, int n_tokens, bool segment_reuse) {
  const std::vector<PromptSegment>& segs = g.req.segments;
  for (const PromptSegment& s : segs) {
    if (s.span.end <= n_tokens) continue;
    if (s.span.begin >= n_tokens) break;
    const bool held = segment_reuse && &s != &segs.back() && segments_->contains(s.id);
    return s.image || held ? s.span.begin : n_tokens;
  }
  return n_tokens;
}

// The exact prefix [anchor, n) in a's segments: its text as runs of source "prefix", each image
// in it as a segment of its own (its id, media), counted in the request's reused images.
void Scheduler::report_prefix(Generation& g, Admission& a, int anchor, int n) {
  int from = anchor;
  int32_t at = anchor;  // the position of token `from`
  for (const PromptSegment& s : g.req.segments) {
    if (!s.image || s.span.end > n) continue;  // (the prefix never ends inside an image)
    if (s.span.begin > from)
      a.segments.push_back({std::nullopt, s.span.begin - from, at, SpanSource::Prefix});
    a.segments.push_back({s.id, s.span.size(), s.position, SpanSource::Prefix, -1, true});
    if (g.req.media) ++g.req.media->reused_chunks;
    from = s.span.end;
    at = s.position + int32_t(s.image->extent());
  }
  if (n > from) a.segments.push_back({std::nullopt, n - from, at, SpanSource::Prefix});
}

// A prompt of text (and of the request's images): the exact prefix (text only), then its
// segments (serve_segments); what is left is the query. False: nothing is reused (the caller
// assembles the prompt).
Result<bool> Scheduler::admit_text(Generation& g, const ChunkContent& q, Admission& a) {
  const std::vector<int32_t>& all = g.req.prompt_ids;  // empty: not a prompt of text only
  g.segment_served.assign(g.req.segments.size(), NotServed);
  const ReusePolicy policy = g.req.policy;
  if (all.empty() || policy == ReusePolicy::Reprefill) return false;  // (reprefill is kept)
  const int anchor = int(ctx_.cache().anchor_extent());
  const bool images = has_images(g.req);
  if (images && g.req.segments.back().image) return false;  // the query must be text
  const PrefixIndex::Match m =
      prefix_ ? prefix_->lookup(std::span(all).first(all.size() - 1)) : PrefixIndex::Match{};
  const bool segment_reuse = segments_ && policy != ReusePolicy::Prefix &&
                             policy != ReusePolicy::Blind && g.req.segments.size() > 1;
  const int n = prefix_cut(g, m.n_tokens, segment_reuse);
  if (n > anchor) {
    auto fork = prefix_->fork_prefix(m.entry, n);
    if (!fork.ok()) return false;
    g.seq = *fork;
    g.prefix_end = n;
    report_prefix(g, a, anchor, n);
    ++metrics_.seg_prefix;
    a.reused = n - anchor;
  } else if (segment_reuse) {
    g.seq = ctx_.pool().create_sequence();
    KAMERA_TRY(ctx_.cache().append_anchor(g.seq));
    g.prefix_end = anchor;
  } else {
    return false;
  }
  int pending = g.prefix_end;
  if (segment_reuse) KAMERA_TRY(serve_segments(g, a, pending));
  g.query_ids = q.tokens;
  // The query: the last segment (text) from `pending`, the rest prefilled before it; a prompt of
  // text only keeps its tokens from `pending` whole (one forward, as a cold run).
  const PromptSegment* last = g.req.segments.empty() ? nullptr : &g.req.segments.back();
  const int from = images && last ? std::max(pending, last->span.begin) : pending;
  KAMERA_TRY(prefill_until(g, a, pending, from));
  a.pos = last ? last->position + (from - last->span.begin) : from;
  a.query = ChunkContent::from_tokens({all.begin() + from, all.end()});
  return true;
}

// The prompt tokens of g that an admission in `busy` is computing and the caches do not hold yet
// (its common prefix with that prompt past what the prefix index holds, and g's segments past it
// that the segment index misses and that prompt has), for the admission where waiting pays: one
// whose prompt is at most g's plus those tokens (g then waits about as long as sharing the
// engine with it would have cost, and nobody computes them twice); not for a short prompt
// behind a long one. 0 for prompts that reuse nothing.
int64_t Scheduler::shared_in_flight(const Generation& g,
                                    std::span<const Generation* const> busy) const {
  const std::vector<int32_t>& ids = g.req.prompt_ids;
  if (busy.empty() || ids.size() < 2 || g.req.policy == ReusePolicy::Reprefill ||
      !g.req.window_id.empty())
    return 0;
  const size_t held =
      prefix_ ? size_t(prefix_->best_match(std::span(ids).first(ids.size() - 1)).n_tokens) : 0;
  const bool by_segment =
      segments_ && g.req.policy != ReusePolicy::Prefix && g.req.policy != ReusePolicy::Blind;
  int64_t best = 0;
  for (const Generation* b : busy) {
    const std::vector<int32_t>& o = b->req.prompt_ids;
    const size_t n = std::min(ids.size() - 1, o.size());
    const size_t common =
        prefix_
            ? size_t(std::mismatch(ids.begin(), ids.begin() + std::ptrdiff_t(n), o.begin()).first -
                     ids.begin())
            : 0;
    int64_t shared = common > held ? int64_t(common - held) : 0;
    const std::vector<PromptSegment>& segs = g.req.segments;
    for (size_t i = 0; by_segment && i + 1 < segs.size(); ++i) {
      const PromptSegment& s = segs[i];
      if (size_t(s.span.end) <= std::max(common, held) || s.image || segments_->contains(s.id))
        continue;
      for (const PromptSegment& t : b->req.segments)
        if (t.id == s.id && !t.image) {
          shared += s.span.size();
          break;
        }
    }
    if (o.size() <= ids.size() + size_t(shared)) best = std::max(best, shared);
  }
  return best;
}

// Keeps what g's prompt sequence holds exactly (the prompt; with_reply: and choice 0's reply up to
// its last decoded token) in the prefix index, for the next request that repeats or extends it.
// A prompt with segments served from another context is kept only up to the first of them: rows
// behind it are not what a cold run computes.
void Scheduler::remember(Generation& g, bool with_reply) {
  if (!prefix_ || g.req.prompt_ids.empty() || g.seq < 0 || g.window_fork) return;
  const int held = ctx_.pool().n_tokens(g.seq), prompt = int(g.req.prompt_ids.size());
  std::vector<int32_t> tokens = g.req.prompt_ids;
  for (size_t i = 0; i < g.segment_served.size(); ++i) {
    if (g.segment_served[i] != ServedNear && g.segment_served[i] != ServedStore) continue;
    tokens.resize(size_t(g.req.segments[i].span.begin));
    with_reply = false;
    break;
  }
  if (with_reply && !g.choices.empty() && g.choices[0].seq == g.seq && g.choices[0].gen) {
    const std::vector<int32_t>& reply = g.choices[0].gen->tokens();
    if (held < prompt || held - prompt > int(reply.size())) return;  // not the tokens it holds
    tokens.insert(tokens.end(), reply.begin(), reply.begin() + (held - prompt));
  }
  if (held < int(tokens.size())) return;
  auto r = prefix_->insert(g.seq, tokens);
  if (!r.ok()) log().warn("prefix index: {}", r.message());
}

// Keeps the conditioned KV of every segment this prompt computed (in whole or in part: not those
// of the exact prefix, kept when they were computed, nor those served from the index) or fetched
// from the store (another server's, marked not exact), with the
// ids of the segments before it and whether all of those were exact, once per generation; long
// ones are queued for a canonical (compact_one).
void Scheduler::remember_segments(Generation& g) {
  if (!segments_ || g.segments_kept || g.seq < 0 || g.window_fork) return;
  if (ctx_.pool().n_tokens(g.seq) < int(g.req.prompt_ids.size())) return;
  g.segments_kept = true;
  std::vector<ChunkId> ante;
  bool exact = true;  // every segment so far holds what a re-prefill holds
  for (size_t i = 0; i < g.req.segments.size(); ++i) {
    const PromptSegment& s = g.req.segments[i];
    const char served = g.segment_served[i];
    if ((served == NotServed || served == ServedStore) && s.span.end > g.prefix_end) {
      segments_->insert(
          s.id, ante,
          read_chunk_kv(ctx_.pool(), g.seq, s.span.begin, s.span.size(), ctx_.pool().dtype()),
          exact && served == NotServed);
      const bool worth =
          served == NotServed && opts_.compact_tokens > 0 && s.span.size() >= opts_.compact_tokens;
      if (worth && to_compact_.size() < opts_.compact_queue &&
          compact_queued_.insert(s.id).second) {
        to_compact_.push_back({s.id, content_of(g.req, s)});
        ++g.usage.background_queued;
      }
    }
    exact = exact && served != ServedNear && served != ServedStore;
    ante.push_back(s.id);
  }
}

// When nothing is being admitted (Scheduler::background_due) and the pool has room for two whole
// contexts besides: the oldest queued segment's canonical, formed as a task (its forward runs in
// slices, and waits while any admission is in flight).
void Scheduler::start_background() {
  if (to_compact_.empty() || !segments_) return;
  // Only with room to spare: a request arriving meanwhile never waits for these pages.
  const int64_t page = ctx_.pool().page_tokens();
  const int64_t need = 2 * ((ctx_.model().cfg.ctx_len + page - 1) / page + 1);
  if (ctx_.pool().n_free_pages() < need) return;
  auto t = std::make_unique<Task>();
  t->exclusive = true;  // it writes to the store
  t->background = true;
  t->run = std::make_unique<SlicedTask>([this] {
    try {
      compact_one();
    } catch (const std::exception& e) {  // never let an exception end a task's thread
      log().warn("background canonical: {}", e.what());
    }
  });
  tasks_.push_back(std::move(t));
}

// C_B = KV(B | anchor) of the oldest queued segment (one forward of [anchor · B]), then each of
// its occurrences keeps the patch of its deficit where that is smaller than its rows.
void Scheduler::compact_one() {
  const ChunkId id = to_compact_.front().first;  // a plain variable: the lambdas below capture it
  const auto content = std::move(to_compact_.front().second);
  to_compact_.pop_front();
  compact_queued_.erase(id);
  if (!segments_->contains(id)) return;  // evicted meanwhile
  bool formed = false;
  auto canon = ctx_.cache().canonical(*content, DType::F32, &formed);
  if (!canon.ok()) return log().warn("background canonical: {}", canon.message());
  metrics_.background_canonicals += formed;
  const PatchOptions po = compact_patch_options();
  // Each context's patch is stored too (through to the shared tiers): another server that meets
  // the segment in the same context serves it from there (fetch_segments) instead of a forward.
  auto n = segments_->compact(
      id, *canon,
      [&](const ChunkKV& rows, const ChunkKV& base) { return form_patch(rows, base, po); },
      [&](std::span<const ChunkId> ante, const Patch& p) {
        ctx_.store().put_patch(std::make_shared<const PatchEntry>(PatchEntry{
            PatchKey::make(id, ante, po), p, std::vector<ChunkId>(ante.begin(), ante.end())}));
      });
  if (!n.ok()) return log().warn("background patch: {}", n.message());
  metrics_.background_patches += *n;
}

}  // namespace kamera
