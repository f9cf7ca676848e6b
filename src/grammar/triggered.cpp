#include "grammar/triggered.h"

namespace kamera::grammar {

TriggeredConstraint::TriggeredConstraint(std::shared_ptr<const CompiledGrammar> g,
                                         std::string trigger)
    : g_(std::move(g)), trigger_(std::move(trigger)) {}

void TriggeredConstraint::mask(std::span<float> logits) {
  if (inner_ && !broken_) inner_->mask(logits);
}

Status TriggeredConstraint::accept(int32_t token) {
  if (broken_) return Status::Ok();
  if (inner_) return inner_->accept(token);
  const TokenTrie& trie = g_->trie();
  if (token < 0 || token >= trie.n_vocab() || trie.is_eog(token)) return Status::Ok();
  text_ += trie.bytes(token);
  const size_t at = text_.find(trigger_);
  if (at == std::string::npos) {
    // Only the end that may still begin the trigger matters.
    if (text_.size() > trigger_.size()) text_.erase(0, text_.size() - trigger_.size());
    return Status::Ok();
  }
  inner_.emplace(g_);
  if (!inner_->accept_text(std::string_view(text_).substr(at)).ok()) broken_ = true;
  return Status::Ok();
}

ForcedRun TriggeredConstraint::forced(int max, bool guess_text) {
  if (!inner_ || broken_) return {};
  return inner_->forced(max, guess_text);
}

bool TriggeredConstraint::complete() const {
  return !inner_ || broken_ || inner_->complete();
}

}  // namespace kamera::grammar
