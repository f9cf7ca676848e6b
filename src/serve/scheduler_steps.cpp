// The scheduler's engine-thread steps: admitting a generation (its prompt's chunks resolved and
// assembled into a sequence) and the batched decode step that emits every active generation's
// next token (serve/scheduler.h).
#include <utility>

#include "core/log.h"
#include "grammar/triggered.h"
#include "serve/scheduler.h"

namespace kamera {

namespace {

// A failure of the engine or the pool while serving: the request may succeed later (503).
Error capacity_error(const Error& e) {
  return Error{ErrorCode::OutOfMemory, e.message};
}

}  // namespace

// Builds the chunk list of a prompt (all parts but the query) and the query content. Text parts
// arrive tokenized from the worker that parsed the request (server/prompt_tokens.h).
Result<std::pair<std::vector<ChunkContent>, ChunkContent>> Scheduler::resolve(const GenRequest& r) {
  auto image = [&](size_t i) {
    return r.parts[i].is_chunk && r.media ? r.media->find(r.parts[i].id) : nullptr;
  };
  auto text = [&](size_t i) -> Result<ChunkContent> {
    if (r.parts[i].tokens.empty())
      return make_error(ErrorCode::Internal, "prompt part {} reached the scheduler untokenized", i);
    return ChunkContent::from_tokens(r.parts[i].tokens);
  };
  std::vector<ChunkContent> chunks;
  for (size_t i = 0; i + 1 < r.parts.size(); ++i) {
    const PromptPart& p = r.parts[i];
    if (const ChunkContent* img = image(i)) {
      chunks.push_back(*img);  // an image of the request: its KV is the cache's
    } else if (p.is_chunk) {
      auto e = ctx_.store().find_canonical(p.id);
      if (!e) return make_error(ErrorCode::NotFound, "unknown chunk id {}", p.id.hex());
      chunks.push_back(e->content);
    } else {
      KAMERA_ASSIGN_OR_RETURN(auto c, text(i));
      chunks.push_back(std::move(c));
    }
  }
  KAMERA_ASSIGN_OR_RETURN(auto q, text(r.parts.size() - 1));
  return std::make_pair(std::move(chunks), std::move(q));
}

// The prompt after a window: a fork of the window (its slots are the reused segments), then the
// prompt's parts before the query (chunks and text) prefilled behind the window's content, in
// order ("reprefilled": a window completion keeps every part it is given).
Status Scheduler::admit_window(Generation& g, Assembly& a) {
  KAMERA_ASSIGN_OR_RETURN(Window * w, windows_.find(g.client, g.req.window_id));
  auto f = w->fork();
  if (!f.ok()) return capacity_error(f.error());
  g.window_fork = std::move(f.value());
  g.seq = g.window_fork->sequence();
  for (const WindowSlot& s : g.window_fork->slots()) {
    const SpanSource src = s.clean    ? SpanSource::WindowClean
                           : !s.patch ? (s.conditioned ? SpanSource::Canonical : SpanSource::Blind)
                           : s.orbit  ? SpanSource::WindowOrbit
                                      : SpanSource::WindowPatch;
    a.spans.push_back({s.id, s.n_tokens(), s.position, src});
    a.reused += s.n_tokens();
    assembler_.counters().patch_orbit += s.orbit;
  }
  int32_t& pos = a.query_pos;
  pos = g.window_fork->next_position();
  KAMERA_ASSIGN_OR_RETURN(auto res, resolve(g.req));
  auto& [chunks, q] = res;
  int64_t end = int64_t(pos) + q.extent();
  for (const ChunkContent& c : chunks) end += c.extent();
  if (exceeds_context(g, end)) return refuse_context(g, a, end);  // before any forward
  for (const ChunkContent& c : chunks) {
    auto r = ctx_.cache().forward_chunk(g.seq, c, pos);
    if (!r.ok()) return capacity_error(r.error());
    a.spans.push_back({ctx_.cache().id_of(c), c.n(), pos, SpanSource::Reprefilled});
    ++assembler_.counters().reprefilled;
    a.recomputed += c.n();
    pos += c.extent();
  }
  a.query = std::move(q);
  return Status::Ok();
}

void Scheduler::count_segment(SegmentSource s) {
  switch (s) {
    case SegmentSource::Canonical:
      ++assembler_.counters().canonical;
      break;
    case SegmentSource::PatchHit:
      ++assembler_.counters().patch_exact;
      break;
    case SegmentSource::PatchFormed:
      ++assembler_.counters().patch_formed;
      break;
    case SegmentSource::Blind:
      ++assembler_.counters().blind;
      break;
    case SegmentSource::Reprefilled:
      ++assembler_.counters().reprefilled;
      break;
  }
}

// The one check of the context: a prompt ending at `end` leaves room for max_tokens (at least
// one token when the request names none).
bool Scheduler::exceeds_context(const Generation& g, int64_t end) const {
  return end + std::max(1, g.req.gen.max_tokens) > ctx_.model().cfg.ctx_len;
}

// A prompt found too long before any forward: admit() answers it (fail_context).
Status Scheduler::refuse_context(Generation& g, Assembly& a, int64_t end) {
  g.over_context = true;
  a.query_pos = int32_t(std::min<int64_t>(end, INT32_MAX));
  return make_error(ErrorCode::InvalidArgument, "the prompt does not fit the context");
}

// A prompt of text and the request's images served by the assembler from the caches (the
// sequence it built is the generation's, also on failure: release frees it). Images it served are
// counted in the request's reused images.
Status Scheduler::admit_plan(Generation& g, Assembly& a) {
  auto served = assembler_.assemble(g.req.plan, a);
  g.seq = a.seq;
  if (!served.ok()) return served.error();
  if (!*served) return make_error(ErrorCode::NotFound, "nothing held");
  if (g.req.media)
    for (const ServedSegment& s : a.spans)
      g.req.media->reused_chunks += s.media && s.source != SpanSource::Recomputed;
  return Status::Ok();
}

// A prompt of parts: served from the caches when they hold some of it (admit_plan), else its
// chunks assembled from the store into a new sequence.
Status Scheduler::admit_chunks(Generation& g, Assembly& a) {
  KAMERA_ASSIGN_OR_RETURN(auto res, resolve(g.req));
  auto& [chunks, q] = res;
  int64_t end = ctx_.cache().anchor_extent() + q.extent();
  for (const auto& c : chunks) end += c.extent();
  if (exceeds_context(g, end)) return refuse_context(g, a, end);  // before any forward
  g.query_ids = q.tokens;
  Status planned = admit_plan(g, a);
  if (planned.ok() || planned.code() != ErrorCode::NotFound) return planned;
  g.seq = ctx_.pool().create_sequence();
  ServeOptions so;
  so.policy = chunk_policy(g.req.plan.policy);
  so.patch.rank = g.req.rank;
  so.patch.cap_rank = true;
  if (g.req.deep_half) so.patch.layers.kind = LayerSet::Kind::DeepHalf;
  if (g.req.media && so.policy != ServePolicy::Reprefill)
    g.req.media->reused_chunks = g.req.media->already_stored(ctx_.store());
  auto rep = ctx_.cache().assemble(g.seq, chunks, so);
  if (!rep.ok()) return capacity_error(rep.error());
  for (const SegmentReport& s : rep->segments) {
    const bool media = g.req.media && g.req.media->find(s.id);
    a.spans.push_back({s.id, s.n_tokens, s.position, span_source_of(s.source), -1, media});
    count_segment(s.source);
  }
  a.reused = rep->tokens_reused;
  a.recomputed = rep->tokens_computed;
  a.query_pos = rep->next_position;
  a.query = std::move(q);
  return Status::Ok();
}

// Assembles and prefills the generation's prompt and emits its first token: true when it goes
// on decoding (in a task: the forwards run sliced).
bool Scheduler::admit(Generation& g) {
  if (g.cancelled->load()) return false;
  g.t_admit = now_s();
  make_room(g, 0);  // cached prefixes never take the pages this prompt needs
  Assembly& a = g.assembly;
  Status st = g.req.window_id.empty() ? admit_chunks(g, a) : admit_window(g, a);
  const int32_t ctx_len = ctx_.model().cfg.ctx_len;
  const int64_t prompt_end = g.over_context ? a.query_pos : int64_t(a.query_pos) + a.query.extent();
  const int64_t left = ctx_len - prompt_end;
  if (st.ok() && exceeds_context(g, prompt_end)) g.over_context = true;
  if (g.over_context) {
    release(g);
    fail_context(g, prompt_end);
    return false;
  }
  const int64_t cap = g.req.default_max_tokens > 0 ? g.req.default_max_tokens : left;
  g.max_tokens = int(g.req.gen.max_tokens > 0 ? g.req.gen.max_tokens : std::min(cap, left));
  Result<std::vector<float>> logits =
      st.ok() ? ctx_.cache().forward_chunk(g.seq, a.query, a.query_pos, LogitsMode::Last)
              : Result<std::vector<float>>(st.error());
  if (!logits.ok()) {
    release(g);
    fail(g, st.ok() ? capacity_error(logits.error()) : logits.error());
    return false;
  }
  PromptUsage& u = g.usage;
  u.prompt_tokens = ctx_.cache().anchor_extent() + a.query.n();
  for (const ServedSegment& s : a.spans) u.prompt_tokens += s.tokens;
  u.reused = a.reused;
  u.recomputed = a.recomputed + a.query.n();
  // Served without a forward: all but what was recomputed (the anchor only counts with the rest).
  // `recomputed` counts forward tokens, which exceed the prompt's where a patch is formed here
  // (the chunk's canonical and its conditioned forward): never below none.
  u.cached_tokens = u.reused > 0 ? std::max<int64_t>(0, u.prompt_tokens - u.recomputed) : 0;
  u.policy = g.req.plan.policy;
  u.reuse_budget = g.req.plan.reuse_budget;
  u.repair_candidates = a.repair_candidates;
  u.repaired = a.repaired;
  u.segments = std::move(a.spans);
  if (g.query_ids.empty()) g.query_ids = a.query.tokens;  // admit_chunks sets the whole query's
  remember(g, false);
  if (g.req.media) metrics_.image_chunk_hits += g.req.media->reused_chunks;
  metrics_.prompt_tokens += u.prompt_tokens;
  metrics_.tokens_reused += u.reused;
  metrics_.tokens_recomputed += u.recomputed;
  Status started = start_choices(g, std::move(*logits), int32_t(prompt_end));
  if (!started.ok()) {
    release(g);
    fail(g, capacity_error(started.error()));
    return false;
  }
  if (g.choices_left > 0) keep_segments(g);  // after the first token: not in its latency
  return g.choices_left > 0;
}

// Keeps what g's prompt sequence holds exactly in the prefix index (with_reply: and choice 0's
// reply up to its last decoded token), for the next request that repeats or extends it.
void Scheduler::remember(Generation& g, bool with_reply) {
  if (g.seq < 0 || g.window_fork || g.req.plan.ids.empty()) return;
  std::span<const int32_t> reply;
  if (with_reply && !g.choices.empty() && g.choices[0].seq == g.seq && g.choices[0].gen)
    reply = g.choices[0].gen->tokens();
  assembler_.remember(g.req.plan, g.assembly, g.seq, reply);
}

// Keeps the segments g's prompt computed in the segment index, once per generation.
void Scheduler::keep_segments(Generation& g) {
  if (g.seq < 0 || g.window_fork || g.req.plan.ids.empty()) return;
  const int queued = g.assembly.background_queued;
  assembler_.keep_segments(g.req.plan, g.assembly, g.seq);
  g.usage.background_queued += g.assembly.background_queued - queued;
}

// The prompt's choices: choice 0 on the prompt's sequence, each other on a copy-on-write fork of
// it (the prompt's pages are shared, never copied), each with its own generation loop (choice i
// seeded with seed + i); then each takes its first token from the prompt's logits.
Status Scheduler::start_choices(Generation& g, std::vector<float> logits, int32_t next_pos) {
  const Tokenizer* tok = ctx_.model().tokenizer ? &*ctx_.model().tokenizer : nullptr;
  for (int i = 0; i < g.req.n; ++i) {
    Generation::Choice c;
    c.index = g.req.first_index + i;
    if (i == 0) {
      c.seq = g.seq;
    } else {
      auto f = ctx_.pool().fork(g.seq);
      if (!f.ok()) return f.error();
      c.seq = *f;
    }
    GenerateParams p = g.req.gen;
    p.max_tokens = g.max_tokens;
    p.sampling.seed += uint64_t(i);
    if (g.req.grammar && g.req.grammar_trigger.empty())
      c.constraint = std::make_unique<grammar::GrammarConstraint>(g.req.grammar);
    else if (g.req.grammar)
      c.constraint =
          std::make_unique<grammar::TriggeredConstraint>(g.req.grammar, g.req.grammar_trigger);
    c.gen = std::make_unique<Generator>(tok, std::move(p), g.query_ids, c.constraint.get(),
                                        g.cancelled.get());
    if (opts_.spec == SchedulerOptions::Spec::Ngram) {
      NgramParams np;
      np.k_max = std::max(1, opts_.spec_draft_max);
      const std::vector<int32_t>& context = g.req.plan.ids.empty() ? g.query_ids : g.req.plan.ids;
      c.drafter = std::make_unique<NgramDrafter>(context, np);
    }
    if (opts_.spec == SchedulerOptions::Spec::Draft && opts_.draft && !has_images(g.req))
      c.mirror = opts_.draft->sequence();
    c.next_pos = next_pos;
    g.choices.push_back(std::move(c));
  }
  g.choices_left = g.req.n;
  g.t_first = now_s();
  metrics_.ttft_seconds.observe(g.t_first - g.t_submit);
  PromptUsage& u = g.usage;
  u.queue_s = g.t_admit - g.t_submit;
  u.prefill_s = g.t_first - g.t_admit;
  u.ttft_s = g.t_first - g.t_submit;
  note_prefill_speed(u.recomputed, u.prefill_s);
  u.prefill_tokens_per_s = metrics_.prefill_tokens_per_s.load();
  g.out(PromptAdmitted{u.prompt_tokens, u.cached_tokens});
  for (size_t i = 0; i < g.choices.size() && g.choices_left > 0; ++i) {
    std::vector<float> l = i + 1 < g.choices.size() ? logits : std::move(logits);
    step_choice(g, g.choices[i], l);
  }
  return Status::Ok();
}

// Runs one step of a choice's generation loop on its logits and sends what it shows; false once
// the choice ended.
bool Scheduler::step_choice(Generation& g, Generation::Choice& c, std::span<float> logits) {
  const size_t before = c.gen->tokens().size();
  GenStep s = c.gen->step(logits);
  return emit(g, c, std::move(s), int64_t(c.gen->tokens().size() - before));
}

// Sends what a step (or a checked draft's steps) of a choice shows: `made` tokens were generated;
// false once the choice ended.
bool Scheduler::emit(Generation& g, Generation::Choice& c, GenStep s, int64_t made) {
  g.generated += int(made);
  metrics_.tokens_generated += made;
  c.untold += made;
  if (!s.text.empty() || !s.logprobs.empty())
    g.out(TextDelta{c.index, std::move(s.text), std::move(s.logprobs), std::exchange(c.untold, 0)});
  if (!s.done) {
    c.last = s.token;
    return true;
  }
  g.stop_sequence = c.gen->stop_sequence();
  end_choice(g, c, s.reason);
  return false;
}

// A choice ended: its fork goes back to the pool; the generation ends with its last choice.
void Scheduler::end_choice(Generation& g, Generation::Choice& c, FinishReason reason) {
  c.done = true;
  if (--g.choices_left > 0) {
    if (c.seq != g.seq) ctx_.pool().free_sequence(c.seq);
    c.seq = -1;
    g.out(ChoiceEnd{c.index, reason});
    return;
  }
  finish(g, reason, c.index);
}

// Ends the generation with `reason`: every choice still decoding ends so, and the Done event
// (with the usage) goes with choice `last` (by default, the last one still decoding).
void Scheduler::finish(Generation& g, FinishReason reason, int last) {
  std::vector<Generation::Choice*> open;
  for (Generation::Choice& c : g.choices)
    if (!c.done) open.push_back(&c);
  if (last < 0) {
    last = open.empty() ? g.req.first_index : open.back()->index;
    if (!open.empty()) open.pop_back();
  }
  for (Generation::Choice* c : open) {
    c->done = true;
    g.out(ChoiceEnd{c->index, reason});
  }
  g.choices_left = 0;
  remember(g, true);
  keep_segments(g);
  g.out(GenerationEnd{last, reason,
                      Usage{std::move(g.usage), g.generated, g.drafted, g.accepted, g.forced},
                      std::move(g.stop_sequence)});  // g ends here
  release(g);
}

// One batched forward over every choice still decoding (with its draft, when speculating), then
// one step of each choice's loop (or one per checked draft token: verify_draft).
void Scheduler::decode_step() {
  std::vector<Engine::DecodeRow> rows;
  std::vector<std::pair<Generation*, Generation::Choice*>> owner;
  const double t0 = now_s();  // the step's time includes drafting it
  propose_all();
  for (auto& g : active_)
    for (Generation::Choice& c : g->choices)
      if (!c.done) {
        rows.push_back({c.seq, c.last, Pos::linear(c.next_pos), c.draft});
        owner.push_back({g.get(), &c});
      }
  // The prefill pieces the tasks offered in this step ride in the same batch (chunked prefill).
  const std::vector<Engine::Piece> pieces = pacer_.take_pieces();
  int piece_tokens = 0;
  for (const Engine::Piece& p : pieces) piece_tokens += p.n;
  auto logits = ctx_.engine().decode(ctx_.pool(), rows, pieces);
  if (!logits.ok() && drop_drafts(rows, owner))  // drafts never cost a generation its pages
    logits = ctx_.engine().decode(ctx_.pool(), rows, pieces);
  const double dt = now_s() - t0;
  pacer_.ran(logits.ok());  // on a failure the tasks run their pieces themselves
  if (!logits.ok() && assembler_.cached_pages() > 0) {
    assembler_.shrink_cached(0);  // cached KV gives its pages back first; retry next step
    return;
  }
  if (!logits.ok() && active_.empty()) return;  // admissions batched alone: they run their pieces
  if (!logits.ok()) {  // the pool is full: end the newest generation and retry next step
    Generation& g = *active_.back();
    fail(g, make_error(ErrorCode::OutOfMemory, "KV pool full: {}", logits.message()));
    release(g);
    active_.pop_back();
    return;
  }
  account_prefill(dt, piece_tokens, int(rows.size()));
  if (rows.empty()) return;  // a step of admissions' pieces alone
  ++metrics_.decode_steps;
  metrics_.decode_rows += int64_t(rows.size());
  const int64_t made_before = metrics_.tokens_generated.load();
  const size_t V = size_t(ctx_.model().cfg.n_vocab);
  size_t at = 0;  // the row's first logits row
  for (size_t i = 0; i < rows.size(); ++i) {
    auto [g, c] = owner[i];
    const size_t k = 1 + rows[i].draft.size();
    const std::span<float> mine = std::span<float>(*logits).subspan(at * V, k * V);
    at += k;
    if (c->done) continue;  // its generation ended earlier in this step
    if (k > 1) {
      verify_draft(*g, *c, mine);
      continue;
    }
    ++c->next_pos;
    step_choice(*g, *c, mine);
  }
  if (dt > 0) metrics_.decode_tokens_per_s = double(metrics_.tokens_generated - made_before) / dt;
  std::erase_if(active_, [](const std::unique_ptr<Generation>& g) { return g->choices_left == 0; });
}

}  // namespace kamera
