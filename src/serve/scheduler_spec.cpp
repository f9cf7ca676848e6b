// The scheduler's speculative decoding (SchedulerOptions::spec): a choice's draft (by prompt
// lookup, or by the draft model: serve/draft_model.h) rides in the
// decode step as extra rows of its sequence (Engine::DecodeRow::draft), each with its logits;
// the choice's generation loop then steps through them in order, each step choosing its token by
// the acceptance rule (Generator::step with the draft token), until a step does not choose the
// draft. What the step chose there is the next token; the KV of the rejected draft tokens is
// truncated away before anything is sent or kept, so the sequence holds exactly what plain
// decoding would have forwarded.
#include "serve/scheduler.h"

#include <algorithm>

namespace kamera {

// Every decoding choice's draft for this step: the tokens its constraint forces first
// (spec_forced), then the drafter's: by prompt lookup each on its own; by the draft model all
// together (one batched draft forward per draft token).
void Scheduler::propose_all() {
  for (auto& g : active_)
    for (Generation::Choice& c : g->choices)
      if (!c.done) propose_forced(*g, c);
  if (opts_.spec == SchedulerOptions::Spec::Draft) return propose_with_model();
  for (auto& g : active_)
    for (Generation::Choice& c : g->choices)
      if (!c.done) propose(*g, c);
}

// Tokens the choice may still generate after the one this step surely makes and its draft so far.
int Scheduler::draft_room(const Generation& g, const Generation::Choice& c) const {
  return g.max_tokens - int(c.gen->tokens().size()) - 1 - int(c.draft.size());
}

// The draft's head: the tokens the choice's constraint leaves no choice for after `last`.
void Scheduler::propose_forced(const Generation& g, Generation::Choice& c) {
  c.draft.clear();
  c.forced = c.walked = 0;
  if (opts_.spec_forced == SchedulerOptions::Forced::Off || !c.constraint) return;
  const int room = std::min(draft_room(g, c), opts_.spec_draft_max);
  if (room <= 0) return;
  ForcedRun run = c.constraint->forced(room, opts_.spec_forced == SchedulerOptions::Forced::Text);
  c.draft = std::move(run.tokens);
  c.forced = run.sure;
  c.walked = int(c.draft.size());
}

// `before`, the choice's tokens so far and the first n tokens of its draft: what a drafter
// continues.
static std::vector<int32_t> with_draft(const Generation::Choice& c, size_t n,
                                       std::span<const int32_t> before = {}) {
  std::vector<int32_t> h(before.begin(), before.end());
  h.insert(h.end(), c.gen->tokens().begin(), c.gen->tokens().end());
  h.insert(h.end(), c.draft.begin(), c.draft.begin() + std::ptrdiff_t(n));
  return h;
}

// The draft model's proposals: each choice's tokens so far (its prompt as the caches took it, or
// the query's, then its output and its forced tokens) go to its mirror sequence, up to
// spec_draft_max tokens come back, never more than the choice may still generate.
void Scheduler::propose_with_model() {
  std::vector<std::pair<Generation*, Generation::Choice*>> who;
  for (auto& g : active_)
    for (Generation::Choice& c : g->choices)
      if (!c.done && c.mirror && draft_room(*g, c) > 0) who.push_back({g.get(), &c});
  if (who.empty()) return;
  std::vector<std::vector<int32_t>> history(who.size());
  std::vector<DraftModel::Ask> asks;
  for (size_t i = 0; i < who.size(); ++i) {
    auto [g, c] = who[i];
    const std::vector<int32_t>& context = g->req.plan.ids.empty() ? g->query_ids : g->req.plan.ids;
    history[i] = with_draft(*c, c->draft.size(), context);
    asks.push_back({c->mirror.get(), history[i],
                    std::min(draft_room(*g, *c), opts_.draft->options().max),
                    g->req.gen.logit_bias});
  }
  opts_.draft->draft(asks);
  for (size_t i = 0; i < who.size(); ++i) {
    std::vector<int32_t>& d = who[i].second->draft;
    d.insert(d.end(), asks[i].out.begin(), asks[i].out.end());
  }
}

// The prompt-lookup draft after the forced tokens: never more tokens than the choice may still
// generate after the one this step surely makes. The sure forced tokens go to the drafter's
// history at once (they are accepted unless the generation ends; it keeps no other draft), so
// after guessed ones (Forced::Text) there is no lookup this step.
void Scheduler::propose(const Generation& g, Generation::Choice& c) {
  if (!c.drafter || c.walked > c.forced) return;
  const int room = draft_room(g, c);
  if (room <= 0) return;
  if (c.forced > 0)
    c.drafter->sync(with_draft(c, size_t(c.forced)));
  else
    c.drafter->sync(c.gen->tokens());
  const std::vector<int32_t> more = c.drafter->draft(std::min(room, c.drafter->length()));
  c.draft.insert(c.draft.end(), more.begin(), more.end());
}

// The step could not take the drafts' rows (the pool is full): every row goes without its draft.
// False when none had one.
bool Scheduler::drop_drafts(std::span<Engine::DecodeRow> rows,
                            std::span<const std::pair<Generation*, Generation::Choice*>> owner) {
  bool any = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    any = any || !rows[i].draft.empty();
    rows[i].draft = {};
    owner[i].second->draft.clear();
    owner[i].second->forced = owner[i].second->walked = 0;
  }
  return any;
}

// `logits`: 1 + draft.size() rows, row t after the choice's last token and the draft's first t
// tokens. Steps the choice's loop on them while it accepts the draft; sends what the steps showed
// as one delta.
void Scheduler::verify_draft(Generation& g, Generation::Choice& c, std::span<float> logits) {
  const size_t V = size_t(ctx_.model().cfg.n_vocab);
  const int k = 1 + int(c.draft.size());
  const int first = ctx_.pool().n_tokens(c.seq) - k;  // the slot of `last`
  const size_t before = c.gen->tokens().size();
  GenStep all;
  int used = 0, accepted = 0;
  for (int t = 0; t < k; ++t) {
    const int32_t d = t + 1 < k ? c.draft[size_t(t)] : -1;
    GenStep s = c.gen->step(logits.subspan(size_t(t) * V, V), d);
    ++used;
    all.text += s.text;
    for (TokenLogprob& lp : s.logprobs) all.logprobs.push_back(std::move(lp));
    all.token = s.token;
    all.done = s.done;
    all.reason = s.reason;
    const bool kept = d >= 0 && s.token == d;
    accepted += kept;
    if (s.done || !kept) break;
  }
  // The sequence keeps `last` and the accepted draft tokens: the rows forwarded for them.
  (void)ctx_.pool().rollback(c.seq, first + used);
  c.next_pos += used;
  const int drafted = k - 1;
  g.drafted += drafted;
  g.accepted += accepted;
  g.forced += c.forced;
  metrics_.spec_drafted += drafted;
  metrics_.spec_accepted += accepted;
  metrics_.spec_forced += c.forced;
  ++metrics_.spec_rows;
  // The drafter's length adapts to its own part of the draft.
  if (c.drafter && drafted > c.walked)
    c.drafter->feedback(drafted - c.walked, std::max(0, accepted - c.walked));
  emit(g, c, std::move(all), int64_t(c.gen->tokens().size() - before));
}

}  // namespace kamera
