// The scheduler's engine-thread steps: admitting a generation (its prompt's chunks resolved and
// assembled into a sequence) and the batched decode step that emits every active generation's
// next token (server/scheduler.h).
#include "core/log.h"
#include "grammar/triggered.h"
#include "server/openai.h"
#include "server/prompt_parts.h"
#include "server/scheduler.h"

namespace kamera {

namespace {

// A failure of the engine or the pool while serving: the request may succeed later (503).
Error capacity_error(const Error& e) {
  return Error{ErrorCode::OutOfMemory, e.message};
}

const char* policy_name(ServePolicy p) {
  return p == ServePolicy::Patch ? "patch" : p == ServePolicy::Blind ? "blind" : "reprefill";
}

}  // namespace

// Builds the chunk list of a prompt (all parts but the query) and the query content. Text is
// literal but for what the chat template wrote (server/prompt_parts.h). after_window: the prompt
// continues a window's content, so no part is the prompt's first.
Result<std::pair<std::vector<ChunkContent>, ChunkContent>> Scheduler::resolve(const GenRequest& r,
                                                                              bool after_window) {
  const Model& model = ctx_.model();
  const Tokenizer* tok = model.tokenizer ? &*model.tokenizer : nullptr;
  auto image = [&](size_t i) {
    return i < r.parts.size() && r.parts[i].is_chunk && r.media && r.media->find(r.parts[i].id);
  };
  // Text is cut against the context: past it the prompt is refused anyway (admit_chunks), so
  // tokenizing stops there.
  const size_t limit = size_t(model.cfg.ctx_len);
  auto text_content = [&](size_t i) -> Result<ChunkContent> {
    if (!tok)
      return make_error(ErrorCode::InvalidArgument,
                        "this model has no tokenizer: send token chunks");
    const ControlSpots spots{i > 0 && image(i - 1), image(i + 1), opts_.control_tokens_in_text};
    auto ids = text_part_ids(*tok, r.parts[i], i == 0 && !after_window, spots, limit);
    if (ids.empty())
      return make_error(ErrorCode::InvalidArgument, "a text part is empty after tokenization");
    return ChunkContent::from_tokens(std::move(ids));
  };
  std::vector<ChunkContent> chunks;
  for (size_t i = 0; i + 1 < r.parts.size(); ++i) {
    const PromptPart& p = r.parts[i];
    if (image(i)) {
      chunks.push_back(*r.media->find(p.id));  // an image of the request: its KV is the cache's
    } else if (p.is_chunk) {
      auto e = ctx_.store().find_canonical(p.id);
      if (!e) return make_error(ErrorCode::NotFound, "unknown chunk id {}", p.id.hex());
      chunks.push_back(e->content);
    } else {
      KAMERA_ASSIGN_OR_RETURN(auto c, text_content(i));
      chunks.push_back(std::move(c));
    }
  }
  const PromptPart& last = r.parts.back();
  if (!last.tokens.empty())  // a prompt of token ids (checked against the vocabulary)
    return std::make_pair(std::move(chunks), ChunkContent::from_tokens(last.tokens));
  KAMERA_ASSIGN_OR_RETURN(auto q, text_content(r.parts.size() - 1));
  return std::make_pair(std::move(chunks), std::move(q));
}

// The prompt after a window: a fork of the window (its slots are the reused segments), then the
// prompt's parts before the query (chunks and text) prefilled behind the window's content, in
// order ("reprefilled": a window completion keeps every part it is given).
Status Scheduler::admit_window(Generation& g, json& segments, int64_t& reused, int64_t& recomputed,
                               int32_t& pos, ChunkContent& query) {
  KAMERA_ASSIGN_OR_RETURN(Window * w, windows_.find(g.client, g.req.window_id));
  auto f = w->fork();
  if (!f.ok()) return capacity_error(f.error());
  g.window_fork = std::move(f.value());
  g.seq = g.window_fork->sequence();
  for (const WindowSlot& s : g.window_fork->slots()) {
    const char* src = s.clean    ? "clean-view"
                      : !s.patch ? (s.conditioned ? "canonical" : "blind")
                      : s.orbit  ? "patch-orbit"
                                 : "patch";
    segments.push_back(
        {{"id", s.id.hex()}, {"tokens", s.n_tokens()}, {"position", s.position}, {"source", src}});
    reused += s.n_tokens();
    metrics_.seg_patch_orbit += s.orbit;
  }
  pos = g.window_fork->next_position();
  KAMERA_ASSIGN_OR_RETURN(auto res, resolve(g.req, true));
  auto& [chunks, q] = res;
  for (const ChunkContent& c : chunks) {
    if (int64_t(pos) + c.extent() + q.extent() + std::max(1, g.req.gen.max_tokens) >
        ctx_.model().cfg.ctx_len)
      return make_error(ErrorCode::InvalidArgument,
                        "the window's content and the prompt plus max_tokens exceed the model's "
                        "context of {}",
                        ctx_.model().cfg.ctx_len);
    auto r = ctx_.cache().forward_chunk(g.seq, c, pos);
    if (!r.ok()) return capacity_error(r.error());
    segments.push_back({{"id", ctx_.cache().id_of(c).hex()},
                        {"tokens", c.n()},
                        {"position", pos},
                        {"source", segment_source_name(SegmentSource::Reprefilled)}});
    ++metrics_.seg_reprefilled;
    recomputed += c.n();
    pos += c.extent();
  }
  query = std::move(q);
  return Status::Ok();
}

void Scheduler::count_segment(SegmentSource s) {
  switch (s) {
    case SegmentSource::Canonical:
      ++metrics_.seg_canonical;
      break;
    case SegmentSource::PatchHit:
      ++metrics_.seg_patch_exact;
      break;
    case SegmentSource::PatchFormed:
      ++metrics_.seg_patch_formed;
      break;
    case SegmentSource::Blind:
      ++metrics_.seg_blind;
      break;
    case SegmentSource::Reprefilled:
      ++metrics_.seg_reprefilled;
      break;
  }
}

// A prompt of text only whose longest token prefix the index holds: a copy-on-write fork of those
// tokens' pages, then the rest of the prompt is the query (prefilled at once behind it). At least
// the last token is prefilled: its logits are the first token's. False: no reuse (assemble).
bool Scheduler::admit_prefix(Generation& g, const std::vector<ChunkContent>& chunks,
                             const ChunkContent& q, json& segments, int64_t& reused, int32_t& pos,
                             ChunkContent& query) {
  const bool text_only = prefix_ && g.req.window_id.empty() &&
                         std::none_of(g.req.parts.begin(), g.req.parts.end(),
                                      [](const PromptPart& p) { return p.is_chunk; });
  if (!text_only) return false;
  std::vector<int32_t>& all = g.prompt_ids;
  all = ctx_.cache().anchor();
  for (const ChunkContent& c : chunks) all.insert(all.end(), c.tokens.begin(), c.tokens.end());
  all.insert(all.end(), q.tokens.begin(), q.tokens.end());
  const int anchor = int(ctx_.cache().anchor_extent());
  if (g.req.policy == ServePolicy::Reprefill) return false;  // recomputes everything (and is kept)
  const PrefixIndex::Match m = prefix_->lookup(std::span(all).first(all.size() - 1));
  if (m.n_tokens <= anchor) return false;
  auto fork = prefix_->fork_prefix(m.entry, m.n_tokens);
  if (!fork.ok()) return false;
  g.seq = *fork;
  g.cached_tokens = m.n_tokens;
  g.query_ids = q.tokens;
  segments.push_back({{"tokens", m.n_tokens - anchor}, {"position", anchor}, {"source", "prefix"}});
  ++metrics_.seg_prefix;
  reused = m.n_tokens - anchor;
  pos = m.n_tokens;
  query = ChunkContent::from_tokens({all.begin() + m.n_tokens, all.end()});
  return true;
}

// Keeps what g's prompt sequence holds (the prompt; with_reply: and choice 0's reply up to its
// last decoded token) in the prefix index, for the next request that repeats or extends it.
void Scheduler::remember(Generation& g, bool with_reply) {
  if (!prefix_ || g.prompt_ids.empty() || g.seq < 0 || g.window_fork) return;
  const int held = ctx_.pool().n_tokens(g.seq), prompt = int(g.prompt_ids.size());
  std::vector<int32_t> tokens = g.prompt_ids;
  if (with_reply && !g.choices.empty() && g.choices[0].seq == g.seq && g.choices[0].gen) {
    const std::vector<int32_t>& reply = g.choices[0].gen->tokens();
    if (held < prompt || held - prompt > int(reply.size())) return;  // not the tokens it holds
    tokens.insert(tokens.end(), reply.begin(), reply.begin() + (held - prompt));
  }
  if (held < int(tokens.size())) return;
  auto r = prefix_->insert(g.seq, tokens);
  if (!r.ok()) log().warn("prefix index: {}", r.message());
}

// A prompt of parts: its chunks assembled from the store into a new sequence.
Status Scheduler::admit_chunks(Generation& g, json& segments, int64_t& reused, int64_t& recomputed,
                               int32_t& pos, ChunkContent& query) {
  const int32_t ctx_len = ctx_.model().cfg.ctx_len;
  KAMERA_ASSIGN_OR_RETURN(auto res, resolve(g.req, false));
  auto& [chunks, q] = res;
  int64_t end = ctx_.cache().anchor_extent() + q.extent();
  for (const auto& c : chunks) end += c.extent();
  if (end + std::max(1, g.req.gen.max_tokens) > ctx_len) {  // refused before any forward
    g.over_context = true;
    pos = int32_t(std::min<int64_t>(end, INT32_MAX));
    return make_error(ErrorCode::InvalidArgument, "the prompt does not fit the context");
  }
  if (admit_prefix(g, chunks, q, segments, reused, pos, query)) return Status::Ok();
  g.seq = ctx_.pool().create_sequence();
  ServeOptions so;
  so.policy = g.req.policy;
  so.patch.rank = g.req.rank;
  so.patch.cap_rank = true;
  if (g.req.deep_half) so.patch.layers.kind = LayerSet::Kind::DeepHalf;
  if (g.req.media && so.policy != ServePolicy::Reprefill)
    g.req.media->reused_chunks = g.req.media->already_stored(ctx_.store());
  auto rep = ctx_.cache().assemble(g.seq, chunks, so);
  if (!rep.ok()) return capacity_error(rep.error());
  for (const SegmentReport& s : rep->segments) {
    segments.push_back({{"id", s.id.hex()},
                        {"tokens", s.n_tokens},
                        {"position", s.position},
                        {"source", segment_source_name(s.source)}});
    count_segment(s.source);
  }
  reused = rep->tokens_reused;
  recomputed = rep->tokens_computed;
  pos = rep->next_position;
  query = std::move(q);
  return Status::Ok();
}

// Assembles and prefills the generation's prompt and emits its first token: true when it goes
// on decoding (in a task: the forwards run sliced).
bool Scheduler::admit(Generation& g) {
  if (g.cancelled->load()) return false;
  make_room(g, 0);  // cached prefixes never take the pages this prompt needs
  json segments = json::array();
  int64_t reused = 0, recomputed = 0, prompt_tokens = 1;
  int32_t pos = 0;
  ChunkContent query;
  Status st = g.req.window_id.empty() ? admit_chunks(g, segments, reused, recomputed, pos, query)
                                      : admit_window(g, segments, reused, recomputed, pos, query);
  const int32_t ctx_len = ctx_.model().cfg.ctx_len;
  const int64_t prompt_end = g.over_context ? pos : int64_t(pos) + query.extent();
  const int64_t left = ctx_len - prompt_end;
  if (st.ok() && (g.req.gen.max_tokens > 0 ? g.req.gen.max_tokens > left : left < 1))
    g.over_context = true;
  if (g.over_context) {
    release(g);
    fail_context(g, prompt_end);
    return false;
  }
  const int64_t cap = g.req.default_max_tokens > 0 ? g.req.default_max_tokens : left;
  g.max_tokens = int(g.req.gen.max_tokens > 0 ? g.req.gen.max_tokens : std::min(cap, left));
  Result<std::vector<float>> logits =
      st.ok() ? ctx_.cache().forward_chunk(g.seq, query, pos, LogitsMode::Last)
              : Result<std::vector<float>>(st.error());
  if (!logits.ok()) {
    release(g);
    fail(g, st.ok() ? capacity_error(logits.error()) : logits.error());
    return false;
  }
  for (const auto& s : segments) prompt_tokens += s["tokens"].get<int64_t>();
  recomputed += query.n();
  prompt_tokens += query.n();
  if (g.cached_tokens == 0) g.query_ids = query.tokens;
  remember(g, false);
  g.usage = {{"prompt_tokens", prompt_tokens},
             {"prompt_tokens_details", {{"cached_tokens", g.cached_tokens}}},
             {"kamera",
              {{"reused_tokens", reused},
               {"recomputed_tokens", recomputed},
               {"policy", policy_name(g.req.policy)},
               {"segments", segments}}}};
  if (g.req.media) {
    g.usage["images"] = g.req.media->usage();
    metrics_.image_chunk_hits += g.req.media->reused_chunks;
  }
  metrics_.prompt_tokens += prompt_tokens;
  metrics_.tokens_reused += reused;
  metrics_.tokens_recomputed += recomputed;
  Status started = start_choices(g, std::move(*logits), int32_t(prompt_end));
  if (!started.ok()) {
    release(g);
    fail(g, capacity_error(started.error()));
    return false;
  }
  return g.choices_left > 0;
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
    c.next_pos = next_pos;
    g.choices.push_back(std::move(c));
  }
  g.choices_left = g.req.n;
  g.t_first = now_s();
  metrics_.ttft_seconds.observe(g.t_first - g.t_submit);
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
  const int64_t made = int64_t(c.gen->tokens().size() - before);
  g.generated += int(made);
  metrics_.tokens_generated += made;
  if (!s.text.empty() || !s.logprobs.empty()) {
    Event e{Event::Text, std::move(s.text), {}, 200, c.index, std::move(s.logprobs)};
    g.out(std::move(e));
  }
  if (!s.done) {
    c.last = s.token;
    return true;
  }
  end_choice(g, c, s.reason);
  return false;
}

// A choice ended: its fork goes back to the pool; the generation ends with its last choice.
void Scheduler::end_choice(Generation& g, Generation::Choice& c, FinishReason reason) {
  c.done = true;
  if (--g.choices_left > 0) {
    if (c.seq != g.seq) ctx_.pool().free_sequence(c.seq);
    c.seq = -1;
    g.out(
        {Event::ChoiceDone, "", {{"finish_reason", finish_reason_name(reason)}}, 200, c.index, {}});
    return;
  }
  finish(g, finish_reason_name(reason), c.index);
}

// Ends the generation with `reason`: every choice still decoding ends so, and the Done event
// (with the usage) goes with choice `last` (by default, the last one still decoding).
void Scheduler::finish(Generation& g, const char* reason, int last) {
  std::vector<Generation::Choice*> open;
  for (Generation::Choice& c : g.choices)
    if (!c.done) open.push_back(&c);
  if (last < 0) {
    last = open.empty() ? g.req.first_index : open.back()->index;
    if (!open.empty()) open.pop_back();
  }
  for (Generation::Choice* c : open) {
    c->done = true;
    g.out({Event::ChoiceDone, "", {{"finish_reason", reason}}, 200, c->index, {}});
  }
  g.choices_left = 0;
  remember(g, true);
  g.usage["completion_tokens"] = g.generated;
  g.usage["total_tokens"] = g.usage.value("prompt_tokens", int64_t(0)) + g.generated;
  g.out({Event::Done, "", {{"usage", g.usage}, {"finish_reason", reason}}, 200, last, {}});
  release(g);
}

// One batched forward over every choice still decoding, then one step of each choice's loop.
void Scheduler::decode_step() {
  std::vector<Engine::DecodeRow> rows;
  std::vector<std::pair<Generation*, Generation::Choice*>> owner;
  for (auto& g : active_)
    for (Generation::Choice& c : g->choices)
      if (!c.done) {
        rows.push_back({c.seq, c.last, Pos::linear(c.next_pos)});
        owner.push_back({g.get(), &c});
      }
  // The prefill pieces the tasks offered in this step ride in the same batch (chunked prefill).
  const std::vector<Engine::Piece> pieces = pacer_.take_pieces();
  int piece_tokens = 0;
  for (const Engine::Piece& p : pieces) piece_tokens += p.n;
  const double t0 = now_s();
  auto logits = ctx_.engine().decode(ctx_.pool(), rows, pieces);
  const double dt = now_s() - t0;
  pacer_.ran(logits.ok());  // on a failure the tasks run their pieces themselves
  if (!logits.ok() && prefix_ && prefix_->tokens_held() > 0) {
    prefix_->shrink_to(0);  // cached prefixes give their pages back first; retry next step
    return;
  }
  if (!logits.ok()) {  // the pool is full: end the newest generation and retry next step
    Generation& g = *active_.back();
    fail(g, make_error(ErrorCode::OutOfMemory, "KV pool full: {}", logits.message()));
    release(g);
    active_.pop_back();
    return;
  }
  account_prefill(dt, piece_tokens);
  ++metrics_.decode_steps;
  metrics_.decode_rows += int64_t(rows.size());
  if (dt > 0) metrics_.decode_tokens_per_s = double(rows.size()) / dt;
  const size_t V = size_t(ctx_.model().cfg.n_vocab);
  for (size_t i = 0; i < rows.size(); ++i) {
    auto [g, c] = owner[i];
    if (c->done) continue;  // its generation ended earlier in this step
    ++c->next_pos;
    step_choice(*g, *c, std::span<float>(*logits).subspan(i * V, V));
  }
  std::erase_if(active_, [](const std::unique_ptr<Generation>& g) { return g->choices_left == 0; });
}

}  // namespace kamera
