// The scheduler's engine-thread steps: admitting a generation (its prompt's chunks resolved and
// assembled into a sequence) and the batched decode step that emits every active generation's
// next token (server/scheduler.h).
#include "core/log.h"
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
    if (int64_t(pos) + c.extent() + q.extent() + g.req.max_tokens > ctx_.model().cfg.ctx_len)
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

// A prompt of parts: its chunks assembled from the store into a new sequence.
Status Scheduler::admit_chunks(Generation& g, json& segments, int64_t& reused, int64_t& recomputed,
                               int32_t& pos, ChunkContent& query) {
  const int32_t ctx_len = ctx_.model().cfg.ctx_len;
  KAMERA_ASSIGN_OR_RETURN(auto res, resolve(g.req, false));
  auto& [chunks, q] = res;
  int64_t end = ctx_.cache().anchor_extent() + q.extent() + g.req.max_tokens;
  for (const auto& c : chunks) end += c.extent();
  if (end > ctx_len)
    return make_error(ErrorCode::InvalidArgument,
                      "the prompt ({} positions) plus max_tokens ({}) exceeds the model's context "
                      "of {}",
                      end - g.req.max_tokens, g.req.max_tokens, ctx_len);
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
  json segments = json::array();
  int64_t reused = 0, recomputed = 0, prompt_tokens = 1;
  int32_t pos = 0;
  ChunkContent query;
  Status st = g.req.window_id.empty() ? admit_chunks(g, segments, reused, recomputed, pos, query)
                                      : admit_window(g, segments, reused, recomputed, pos, query);
  const int32_t ctx_len = ctx_.model().cfg.ctx_len;
  if (st.ok() && pos + query.extent() + g.req.max_tokens > ctx_len)
    st = make_error(ErrorCode::InvalidArgument,
                    "the prompt plus max_tokens exceeds the model's context of {}", ctx_len);
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
  g.next_pos = pos + query.extent();
  g.sampler = std::make_unique<Sampler>(g.req.sampling);
  g.usage = {{"prompt_tokens", prompt_tokens},
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
  return emit(g, g.sampler->sample(*logits));
}

// Sends one sampled token; returns false when the generation ended.
bool Scheduler::emit(Generation& g, int32_t token) {
  const Tokenizer* tok = ctx_.model().tokenizer ? &*ctx_.model().tokenizer : nullptr;
  if (g.generated == 0) {
    g.t_first = now_s();
    metrics_.ttft_seconds.observe(g.t_first - g.t_submit);
  }
  const bool eos = tok && (token == tok->eos() || token == tok->bos());
  if (!eos) {
    g.out({Event::Text, tok ? tok->decode(g.last, token) : fmt::format("<{}>", token), {}, 200});
    ++g.generated;
    ++metrics_.tokens_generated;
    g.last = token;
  }
  if (eos) return finish(g, "stop"), false;
  if (g.generated >= g.req.max_tokens) return finish(g, "length"), false;
  if (g.cancelled->load()) return finish(g, "cancelled"), false;
  return true;
}

void Scheduler::finish(Generation& g, const char* reason) {
  g.usage["completion_tokens"] = g.generated;
  g.usage["total_tokens"] = g.usage["prompt_tokens"].get<int64_t>() + g.generated;
  g.out({Event::Done, "", {{"usage", g.usage}, {"finish_reason", reason}}, 200});
  release(g);
}

void Scheduler::decode_step() {
  std::vector<Engine::DecodeRow> rows;
  for (auto& g : active_) rows.push_back({g->seq, g->last, Pos::linear(g->next_pos)});
  // The prefill pieces the tasks offered in this step ride in the same batch (chunked prefill).
  const std::vector<Engine::Piece> pieces = pacer_.take_pieces();
  int piece_tokens = 0;
  for (const Engine::Piece& p : pieces) piece_tokens += p.n;
  const double t0 = now_s();
  auto logits = ctx_.engine().decode(ctx_.pool(), rows, pieces);
  const double dt = now_s() - t0;
  pacer_.ran(logits.ok());  // on a failure the tasks run their pieces themselves
  if (!logits.ok()) {       // the pool is full: end the newest generation and retry next step
    Generation& g = *active_.back();
    fail(g, make_error(ErrorCode::OutOfMemory, "KV pool full: {}", logits.message()));
    finish(g, "error");
    active_.pop_back();
    return;
  }
  account_prefill(dt, piece_tokens);
  ++metrics_.decode_steps;
  metrics_.decode_rows += int64_t(rows.size());
  if (dt > 0) metrics_.decode_tokens_per_s = double(rows.size()) / dt;
  const int V = ctx_.model().cfg.n_vocab;
  std::vector<std::unique_ptr<Generation>> keep;
  for (size_t i = 0; i < active_.size(); ++i) {
    Generation& g = *active_[i];
    ++g.next_pos;
    const int32_t t = g.sampler->sample(std::span<const float>(*logits).subspan(i * V, V));
    if (emit(g, t)) keep.push_back(std::move(active_[i]));
  }
  active_ = std::move(keep);
}

}  // namespace kamera
