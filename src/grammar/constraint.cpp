#include "grammar/constraint.h"

#include <bit>
#include <limits>

namespace kamera::grammar {

namespace {

constexpr size_t kRecent = 16;

}  // namespace

size_t GrammarConstraint::Allowed::count() const {
  size_t n = 0;
  for (uint64_t w : bits) n += size_t(std::popcount(w));
  return n;
}

int32_t GrammarConstraint::Allowed::only() const {
  int32_t t = -1;
  for (size_t w = 0; w < bits.size(); ++w) {
    if (!bits[w]) continue;
    if (t >= 0 || std::popcount(bits[w]) != 1) return -1;
    t = int32_t(w * 64) + std::countr_zero(bits[w]);
  }
  return t;
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const CompiledGrammar> g)
    : g_(std::move(g)), m_(g_->grammar()), walk_(m_, g_->trie()) {
  state_ = m_.initial();
}

bool GrammarConstraint::complete() const {
  return !state_.empty() && state_[0] == Matcher::kAccept;
}

void GrammarConstraint::compute(Allowed& a) {
  const TokenTrie& trie = g_->trie();
  a.bits.assign((size_t(trie.n_vocab()) + 63) / 64, 0);
  a.eog = complete();
  for (int32_t n : state_)
    if (m_.byte_ready(n)) g_->masks(m_.pos(n)).accepted.add_to(a.bits);
  // Escaped tokens not already allowed: walked through the stack they start from.
  for (int32_t n : state_) {
    if (!m_.byte_ready(n)) continue;
    scratch_.clear();
    for (int32_t r : g_->masks(m_.pos(n)).escaped)
      if (!a.test(trie.order(r))) scratch_.push_back(r);
    stats_.escaped_walked += scratch_.size();
    const int32_t start[1] = {n};
    walk_.some(start, scratch_, [&](int32_t rank, Fate f) {
      if (f == Fate::Accepted) {
        const int32_t t = trie.order(rank);
        a.bits[size_t(t) >> 6] |= uint64_t(1) << (t & 63);
      }
    });
  }
  stats_.masks++;
  stats_.max_stacks = std::max(stats_.max_stacks, state_.size());
}

const GrammarConstraint::Allowed& GrammarConstraint::allowed() {
  ++clock_;
  if (current_ < 0) {
    for (size_t i = 0; i < recent_.size(); ++i)
      if (recent_[i].state == state_) current_ = int(i);
    if (current_ >= 0) {
      stats_.reused++;
    } else {
      if (recent_.size() < kRecent) {
        recent_.emplace_back();
        current_ = int(recent_.size() - 1);
      } else {
        current_ = 0;
        for (size_t i = 1; i < recent_.size(); ++i)
          if (recent_[i].used < recent_[size_t(current_)].used) current_ = int(i);
      }
      recent_[size_t(current_)].state = state_;
      compute(recent_[size_t(current_)].allowed);
    }
  }
  recent_[size_t(current_)].used = clock_;
  return recent_[size_t(current_)].allowed;
}

void GrammarConstraint::mask(std::span<float> logits) {
  const Allowed& a = allowed();
  const TokenTrie& trie = g_->trie();
  const float ninf = -std::numeric_limits<float>::infinity();
  // Nothing can follow and the text is not complete (only a grammar deeper than the matcher's
  // limit gets here): let the generation end rather than sample a token that breaks it.
  const bool eog = a.eog || a.count() == 0;
  std::vector<float> keep;
  for (int32_t t : trie.eog())
    if (size_t(t) < logits.size()) keep.push_back(logits[size_t(t)]);
  const size_t n = std::min(logits.size(), size_t(trie.n_vocab()));
  for (size_t w = 0; w * 64 < n; ++w) {
    uint64_t off = ~a.bits[w];
    while (off) {
      const size_t t = w * 64 + size_t(std::countr_zero(off));
      off &= off - 1;
      if (t < n) logits[t] = ninf;
    }
  }
  for (size_t t = n; t < logits.size(); ++t) logits[t] = ninf;
  size_t k = 0;
  for (int32_t t : trie.eog())
    if (size_t(t) < logits.size()) logits[size_t(t)] = eog ? keep[k++] : ninf;
}

Status GrammarConstraint::advance(std::string_view bytes, const char* what, int32_t token) {
  std::vector<int32_t> cur = state_;
  for (char c : bytes) {
    m_.advance(cur, uint8_t(c), next_);
    if (next_.empty())
      return make_error(ErrorCode::InvalidArgument, "grammar: {} {} does not fit here", what,
                        token >= 0 ? std::to_string(token) : std::string(bytes));
    cur.swap(next_);
  }
  state_ = std::move(cur);
  current_ = -1;
  return Status::Ok();
}

Status GrammarConstraint::accept(int32_t token) {
  const TokenTrie& trie = g_->trie();
  if (ended_) return make_error(ErrorCode::InvalidArgument, "grammar: a token after the end");
  if (token < 0 || token >= trie.n_vocab())
    return make_error(ErrorCode::InvalidArgument, "grammar: token {} is outside the vocabulary",
                      token);
  if (trie.is_eog(token)) {
    if (!complete())
      return make_error(ErrorCode::InvalidArgument,
                        "grammar: end of generation before the text is complete");
    ended_ = true;
    return Status::Ok();
  }
  if (trie.bytes(token).empty())
    return make_error(ErrorCode::InvalidArgument, "grammar: token {} writes no text", token);
  return advance(trie.bytes(token), "token", token);
}

int32_t GrammarConstraint::longest_of_one_text(const Allowed& a) const {
  const TokenTrie& trie = g_->trie();
  std::vector<int32_t> ids;
  for (size_t w = 0; w < a.bits.size(); ++w)
    for (uint64_t b = a.bits[w]; b; b &= b - 1) {
      if (ids.size() == 64) return -1;
      ids.push_back(int32_t(w * 64) + std::countr_zero(b));
    }
  int32_t best = -1;
  for (int32_t t : ids)
    if (best < 0 || trie.bytes(t).size() > trie.bytes(best).size()) best = t;
  for (int32_t t : ids)
    if (best < 0 || !trie.bytes(best).starts_with(trie.bytes(t))) return -1;
  return best;
}

// An end-of-generation token with bytes (none of the tokenizers' are) is left out of the count of
// the mask (it keeps such a token only when complete): the walk then stops, never drafts it.
ForcedRun GrammarConstraint::forced(int max, bool guess_text) {
  ForcedRun run;
  if (ended_) return run;
  const std::vector<int32_t> saved = state_;
  while (int(run.tokens.size()) < max) {
    const Allowed& a = allowed();
    if (a.eog) break;
    int32_t t = a.only();
    const bool sure = t >= 0 && run.sure == int(run.tokens.size());
    if (t < 0 && guess_text) t = longest_of_one_text(a);
    if (t < 0 || g_->trie().is_eog(t)) break;
    if (!advance(g_->trie().bytes(t), "token", t).ok()) break;
    run.tokens.push_back(t);
    run.sure += sure;
  }
  if (!run.tokens.empty()) {
    state_ = saved;
    current_ = -1;  // its entry may have been replaced meanwhile: looked up again
  }
  return run;
}

Status GrammarConstraint::accept_text(std::string_view text) {
  if (ended_) return make_error(ErrorCode::InvalidArgument, "grammar: text after the end");
  return advance(text, "text", -1);
}

}  // namespace kamera::grammar
