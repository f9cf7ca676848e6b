#include "generate/generator.h"

#include <cmath>
#include <limits>

namespace kamera {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Abort:
      return "abort";
    case FinishReason::None:
      break;
  }
  return "";
}

Generator::Generator(const Tokenizer* tok, GenerateParams p, std::span<const int32_t> history,
                     TokenConstraint* constraint, const std::atomic<bool>* cancel)
    : tok_(tok),
      p_(std::move(p)),
      sampler_(p_.sampling),
      penalties_(p_.penalties, history),
      constraint_(constraint),
      cancel_(cancel),
      stop_(tok ? p_.stop : std::vector<std::string>{}) {
  if (!history.empty()) prev_ = history.back();
}

// The model's end-of-generation set, and BOS (llama2.c's models end a story with it).
bool Generator::ends_generation(int32_t token) const {
  if (p_.ignore_eog || !tok_) return false;
  return tok_->is_eog(token) || token == tok_->bos();
}

std::string Generator::token_bytes(int32_t token) const {
  if (!tok_) return {};
  if (p_.special && token >= 0 && token < tok_->n_vocab() &&
      tok_->vocab().types[size_t(token)] == TokenType::Control)
    return tok_->piece(token);
  if (p_.text_only && !p_.special && token >= 0 && token < tok_->n_vocab() &&
      tok_->vocab().types[size_t(token)] == TokenType::UserDefined) {
    const std::string& piece = tok_->vocab().pieces[size_t(token)];
    if (piece.size() > 4 && piece.starts_with("<|") && piece.ends_with("|>")) return {};
  }
  return tok_->decode(prev_, token);
}

void Generator::add_logprob(std::span<const float> logits, int32_t token) {
  const LogprobTop lp = token_logprobs(logits, token, p_.logprobs);
  TokenLogprob e;
  e.token = token;
  e.bytes = token_bytes(token);
  e.logprob = lp.chosen;
  for (const auto& [t, l] : lp.top) e.top.push_back({t, token_bytes(t), l});
  // Its text starts after the text so far and the unfinished character the stream holds.
  held_lp_.push_back({stop_.text().size() + utf8_.pending(), std::move(e)});
}

// The entries whose text starts before `upto` (bytes of the text), in order.
std::vector<TokenLogprob> Generator::release_logprobs(size_t upto) {
  std::vector<TokenLogprob> out;
  size_t i = 0;
  while (i < held_lp_.size() && held_lp_[i].first < upto)
    out.push_back(std::move(held_lp_[i++].second));
  held_lp_.erase(held_lp_.begin(), held_lp_.begin() + std::ptrdiff_t(i));
  return out;
}

GenStep Generator::finish(FinishReason reason) {
  GenStep s;
  if (done_) {
    s.done = true;
    s.reason = reason_;
    return s;
  }
  s.text = stop_.push(utf8_.flush());
  if (!stop_.stopped()) s.text += stop_.flush();
  done_ = true;
  reason_ = stop_.stopped() ? FinishReason::Stop : reason;
  s.done = true;
  s.reason = reason_;
  // Tokens whose text begins at or after a stop string's cut are not part of the completion.
  s.logprobs = release_logprobs(stop_.stopped() ? stop_.text().size() : SIZE_MAX);
  held_lp_.clear();
  return s;
}

GenStep Generator::step(std::span<float> logits, int32_t draft) {
  if (done_) return finish(reason_);
  if (cancel_ && cancel_->load()) return finish(FinishReason::Cancelled);
  if (int(tokens_.size()) >= p_.max_tokens) return finish(FinishReason::Length);
  apply_logit_bias(logits, p_.logit_bias);
  penalties_.apply(logits);
  if (constraint_) constraint_->mask(logits);
  const int32_t token = draft >= 0 ? sampler_.sample_draft(logits, draft) : sampler_.sample(logits);
  if (!(logits[size_t(token)] > -std::numeric_limits<float>::infinity()))
    return finish(FinishReason::Stop);  // nothing was left to sample
  if (constraint_ && !constraint_->accept(token).ok())
    return finish(FinishReason::Stop);  // the constraint cannot follow the token
  if (ends_generation(token)) {
    GenStep s = finish(FinishReason::Stop);
    s.token = token;
    return s;
  }
  if (p_.logprobs >= 0) add_logprob(logits, token);
  const std::string bytes = token_bytes(token);
  prev_ = token;
  tokens_.push_back(token);
  penalties_.accept(token);
  GenStep s;
  s.token = token;
  s.text = stop_.push(utf8_.push(bytes));
  const FinishReason end = stop_.stopped()                        ? FinishReason::Stop
                           : int(tokens_.size()) >= p_.max_tokens ? FinishReason::Length
                                                                  : FinishReason::None;
  if (end != FinishReason::None) {
    GenStep f = finish(end);
    f.token = token;
    f.text = s.text + f.text;
    return f;
  }
  s.logprobs = release_logprobs(stop_.shown());
  return s;
}

Result<FinishReason> run_generation(Generator& gen, std::vector<float> logits,
                                    const ForwardFn& forward,
                                    const std::function<void(std::string_view)>& on_text) {
  for (;;) {
    GenStep s = gen.step(logits);
    if (on_text && !s.text.empty()) on_text(s.text);
    if (s.done) return s.reason;
    auto next = forward(s.token);
    if (!next.ok()) {
      GenStep f = gen.finish(FinishReason::Stop);
      if (on_text && !f.text.empty()) on_text(f.text);
      return next.error();
    }
    logits = std::move(next.value());
  }
}

}  // namespace kamera
