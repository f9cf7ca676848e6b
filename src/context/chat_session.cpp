#include "context/chat_session.h"

#include "context/chat_prompt.h"

#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "tokenizer/utf8.h"

namespace kamera {

Result<std::unique_ptr<ChatSession>> ChatSession::create(Context& ctx, ChatTemplate tmpl,
                                                         ChatOptions opts) {
  const Model& m = ctx.model();
  if (!m.tokenizer)
    return make_error(ErrorCode::InvalidArgument, "{}: chat needs a model with a vocabulary",
                      m.source);
  if (opts.gen.max_tokens < 0)
    return make_error(ErrorCode::InvalidArgument, "chat: max_tokens {} must be >= 0",
                      opts.gen.max_tokens);
  opts.render.add_generation_prompt = true;
  return std::unique_ptr<ChatSession>(new ChatSession(ctx, std::move(tmpl), std::move(opts)));
}

ChatSession::ChatSession(Context& ctx, ChatTemplate tmpl, ChatOptions opts)
    : ctx_(ctx), tmpl_(std::move(tmpl)), opts_(std::move(opts)) {}

ChatSession::~ChatSession() {
  if (seq_ >= 0) ctx_.pool().free_sequence(seq_);
}

void ChatSession::set_system(std::string text) {
  system_ = std::move(text);
}

void ChatSession::reset() {
  turns_.clear();
}

void ChatSession::set_messages(std::vector<ChatMessage> messages) {
  system_.clear();
  if (!messages.empty() && messages.front().role == "system") {
    system_ = std::move(messages.front().content);
    messages.erase(messages.begin());
  }
  turns_ = std::move(messages);
}

std::vector<ChatMessage> ChatSession::messages() const {
  std::vector<ChatMessage> all;
  if (!system_.empty()) all.push_back({"system", system_});
  all.insert(all.end(), turns_.begin(), turns_.end());
  return all;
}

Result<std::vector<int32_t>> chat_prompt_ids(const Tokenizer& tok, const ChatTemplate& tmpl,
                                             std::span<const ChatMessage> messages,
                                             ChatRenderOptions opts) {
  if (opts.bos_token.empty() && tok.bos() >= 0) opts.bos_token = tok.piece(tok.bos());
  if (opts.eos_token.empty() && tok.eos() >= 0) opts.eos_token = tok.piece(tok.eos());
  KAMERA_ASSIGN_OR_RETURN(std::string text, tmpl.render(messages, opts));
  // Control tokens the template writes (<|im_start|>, a BOS) become their ids; a BOS is added
  // when the vocabulary wants one and the template did not write it.
  std::vector<int32_t> ids = tok.tokenize(text, {.add_special = false, .parse_special = true});
  if (tok.add_bos() && (ids.empty() || ids.front() != tok.bos()))
    ids.insert(ids.begin(), tok.bos());
  return ids;
}

Result<std::vector<int32_t>> chat_turn_ids(const Model& model, const std::string& tmpl,
                                           std::span<const ChatTurn> turns,
                                           bool add_generation_prompt) {
  if (!model.tokenizer)
    return make_error(ErrorCode::InvalidArgument, "{}: the model has no vocabulary", model.source);
  const Tokenizer& tok = *model.tokenizer;
  auto t = !tmpl.empty()                        ? ChatTemplate::from_arg(tmpl)
           : !tok.vocab().chat_template.empty() ? ChatTemplate::from_gguf(tok.vocab().chat_template)
                                                : ChatTemplate::named("chatml");
  if (!t.ok()) return t.error();
  std::vector<ChatMessage> msgs;
  for (const ChatTurn& turn : turns) msgs.push_back({turn.role, turn.content});
  ChatRenderOptions ro;
  ro.add_generation_prompt = add_generation_prompt;
  return chat_prompt_ids(tok, *t, msgs, ro);
}

Result<std::vector<int32_t>> ChatSession::render_tokens() const {
  const std::vector<ChatMessage> all = messages();
  return chat_prompt_ids(*ctx_.model().tokenizer, tmpl_, all, opts_.render);
}

// The last turn's prompt and reply stay in the caches (the prefix index forks the sequence's
// pages, the segment index keeps the segments it computed); the sequence itself is let go.
void ChatSession::keep_turn() {
  if (seq_ < 0) return;
  const int prompt = int(plan_.ids.size());
  const std::span<const int32_t> reply =
      std::span<const int32_t>(cached_).subspan(size_t(std::min<int>(prompt, int(cached_.size()))));
  ctx_.assembler().remember(plan_, assembly_, seq_, reply);
  ctx_.assembler().keep_segments(plan_, assembly_, seq_);
  ctx_.pool().free_sequence(seq_);
  seq_ = -1;
}

// The prompt `ids` as the assembler serves it; logits of its last token.
Status ChatSession::prefill(std::span<const int32_t> ids, TurnStats& st,
                            std::vector<float>& logits) {
  ChunkCache& cache = ctx_.cache();
  const std::vector<int32_t>& anchor = cache.anchor();
  const bool anchored =
      ids.size() > anchor.size() && std::equal(anchor.begin(), anchor.end(), ids.begin());
  PromptPlan plan = plan_start(cache, opts_.reuse_cache ? opts_.policy : ReusePolicy::Reprefill);
  if (plan.policy == ReusePolicy::Patch) plan.reuse_budget = opts_.reuse_budget;
  plan_text(plan, cache, &*ctx_.model().tokenizer, ids.subspan(anchored ? anchor.size() : 0));
  const double t0 = now_ms();
  keep_turn();
  Assembly a;
  auto l = ctx_.assembler().serve(plan, a);
  if (!l.ok()) {
    if (a.seq >= 0) ctx_.pool().free_sequence(a.seq);
    cached_.clear();
    return l.error();
  }
  logits = std::move(*l);
  st.prefill_ms = now_ms() - t0;
  seq_ = a.seq;
  cached_ = plan.ids;
  st.prompt_tokens = int(plan.ids.size());
  st.reused_tokens = int(st.prompt_tokens - a.recomputed - a.query.n());
  st.spans = a.spans;
  st.spans.push_back({std::nullopt, a.query.n(), a.query_pos, SpanSource::Recomputed});
  plan_ = std::move(plan);
  assembly_ = std::move(a);
  return Status::Ok();
}

// Runs the generation loop to its end (the end-of-generation set, a stop string, max_tokens or
// the model's context); every sampled token but the last is forwarded (its KV joins the cache).
Result<std::string> ChatSession::generate(std::vector<float> logits,
                                          const std::function<void(std::string_view)>& on_text,
                                          TurnStats& st) {
  GenerateParams gp = opts_.gen;
  gp.max_tokens = std::min(gp.max_tokens, ctx_.model().cfg.ctx_len - int(cached_.size()));
  gp.sampling.seed += turns_.size();  // each turn draws anew
  Generator gen(&*ctx_.model().tokenizer, gp, cached_, nullptr, opts_.cancel);
  auto forward = [&](int32_t next) -> Result<std::vector<float>> {
    const Pos p = Pos::linear(int32_t(cached_.size()));
    KAMERA_ASSIGN_OR_RETURN(
        auto l,
        ctx_.engine().forward(ctx_.pool(), seq_, ForwardInput::from_tokens({&next, 1}, {&p, 1})));
    cached_.push_back(next);
    return l;
  };
  const double t0 = now_ms();
  auto end = run_generation(gen, std::move(logits), forward, on_text);
  st.decode_ms = now_ms() - t0;
  if (!end.ok()) return end.error();
  st.generated_tokens = int(gen.tokens().size());
  st.stopped_at_eog = *end == FinishReason::Stop;
  st.cancelled = *end == FinishReason::Cancelled;
  return utf8_repair(gen.text());
}

Result<std::string> ChatSession::reply(std::string user,
                                       const std::function<void(std::string_view)>& on_text,
                                       TurnStats* stats) {
  TurnStats st;
  turns_.push_back({"user", std::move(user)});
  auto undo = [&](const Error& e) -> Result<std::string> {
    turns_.pop_back();
    return e;
  };
  auto ids = render_tokens();
  if (!ids.ok()) return undo(ids.error());
  const int ctx_len = ctx_.model().cfg.ctx_len;
  if (int(ids->size()) >= ctx_len)
    return undo(make_error(ErrorCode::InvalidArgument,
                           "chat: the conversation is {} tokens, the model's context {}: reset it",
                           ids->size(), ctx_len));
  std::vector<float> logits;
  Status pre = prefill(*ids, st, logits);
  if (!pre.ok()) return undo(pre.error());
  auto text = generate(std::move(logits), on_text, st);
  if (!text.ok()) return undo(text.error());
  turns_.push_back({"assistant", *text});
  if (stats) *stats = st;
  return text;
}

}  // namespace kamera
