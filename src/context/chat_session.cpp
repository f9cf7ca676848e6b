#include "context/chat_session.h"

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
  const Tokenizer& tok = *m.tokenizer;
  if (opts.render.bos_token.empty() && tok.bos() >= 0) opts.render.bos_token = tok.piece(tok.bos());
  if (opts.render.eos_token.empty() && tok.eos() >= 0) opts.render.eos_token = tok.piece(tok.eos());
  opts.render.add_generation_prompt = true;
  return std::unique_ptr<ChatSession>(new ChatSession(ctx, std::move(tmpl), std::move(opts)));
}

ChatSession::ChatSession(Context& ctx, ChatTemplate tmpl, ChatOptions opts)
    : ctx_(ctx),
      tmpl_(std::move(tmpl)),
      opts_(std::move(opts)),
      seq_(ctx.pool().create_sequence()) {}

ChatSession::~ChatSession() {
  ctx_.pool().free_sequence(seq_);
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

Result<std::vector<int32_t>> ChatSession::render_tokens() const {
  const std::vector<ChatMessage> all = messages();
  KAMERA_ASSIGN_OR_RETURN(std::string text, tmpl_.render(all, opts_.render));
  const Tokenizer& tok = *ctx_.model().tokenizer;
  // Control tokens the template writes (<|im_start|>, a BOS) become their ids; a BOS is added
  // when the vocabulary wants one and the template did not write it.
  std::vector<int32_t> ids = tok.tokenize(text, {.add_special = false, .parse_special = true});
  if (tok.add_bos() && (ids.empty() || ids.front() != tok.bos()))
    ids.insert(ids.begin(), tok.bos());
  return ids;
}

// Keeps the cached prefix that `ids` shares, prefills the rest; logits of the last token.
Status ChatSession::prefill(std::span<const int32_t> ids, TurnStats& st,
                            std::vector<float>& logits) {
  size_t keep = 0;
  if (opts_.reuse_cache)
    while (keep < cached_.size() && keep < ids.size() && cached_[keep] == ids[keep]) ++keep;
  keep = std::min(keep, ids.size() - 1);  // at least one token to forward for the logits
  KAMERA_TRY(ctx_.pool().truncate(seq_, int(keep)));
  cached_.resize(keep);
  std::vector<Pos> pos(ids.size() - keep);
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = Pos::linear(int32_t(keep + i));
  const double t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(
      logits,
      ctx_.engine().forward(ctx_.pool(), seq_, ForwardInput::from_tokens(ids.subspan(keep), pos)));
  st.prefill_ms = now_ms() - t0;
  cached_.assign(ids.begin(), ids.end());
  st.prompt_tokens = int(ids.size());
  st.reused_tokens = int(keep);
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
  if (!pre.ok()) {
    // keep only the prefix known to be in the cache (a failed forward may leave rows behind)
    cached_.resize(std::min(cached_.size(), size_t(ctx_.pool().n_tokens(seq_))));
    (void)ctx_.pool().truncate(seq_, int(cached_.size()));
    return undo(pre.error());
  }
  auto text = generate(std::move(logits), on_text, st);
  if (!text.ok()) return undo(text.error());
  turns_.push_back({"assistant", *text});
  if (stats) *stats = st;
  return text;
}

}  // namespace kamera
