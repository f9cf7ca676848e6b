// Constrained decoding: what the generation loop asks of a constraint at each step, and the
// grammar's answer.
//
// Each step the loop calls mask() on the logits, samples, then accept()s the sampled token. An
// end-of-generation token survives the mask only when complete() (the text so far is a whole
// document); once it is accepted, the constraint has ended.
//
// GrammarConstraint's mask for a matcher state (grammar/matcher.h) is the union, over the
// state's stacks, of the accepted tokens cached for the stack's top position
// (grammar/mask_cache.h), plus the escaped tokens of that position that survive a walk through
// the real stack. The masks of the last few states are kept: inside a string, or between
// array items, a generation comes back to the same state (the same interned stacks) step after
// step, and its mask is then a copy.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/mask_cache.h"
#include "grammar/matcher.h"
#include "grammar/token_walk.h"

namespace kamera::grammar {

// The tokens a constraint knows will (or likely will) come next: `tokens`, of which the first
// `sure` are each the only token the mask leaves (and not end of generation) after the ones
// before; the rest, when asked for, are guesses where the grammar's next text is fixed but not
// its tokens (TokenConstraint::forced).
struct ForcedRun {
  std::vector<int32_t> tokens;
  int sure = 0;
};

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of the tokens that may not come next to -infinity. logits has one entry per
  // token id; entries past the tokenizer's vocabulary (a model's padding) are masked too.
  virtual void mask(std::span<float> logits) = 0;
  // The token chosen. An error, and no change, when the mask would not have allowed it.
  virtual Status accept(int32_t token) = 0;
  // The text so far is complete: end of generation is allowed.
  virtual bool complete() const = 0;
  // Up to `max` tokens that must come next, in order: while the mask would leave exactly one
  // token (and not end of generation), that token, and the same question after it. With
  // `guess_text`, also where every token the mask leaves is a prefix of the longest of them (the
  // next text is fixed, its tokenization is not): that longest token, a guess, and the walk goes
  // on after it. The state is left as it was. Speculative decoding drafts them
  // (serve/scheduler_spec.cpp): the masked distribution puts all its mass on each sure one, at
  // any temperature. None by default.
  virtual ForcedRun forced(int max, bool guess_text = false) {
    (void)max, (void)guess_text;
    return {};
  }
};

struct ConstraintStats {
  size_t masks = 0;           // masks computed
  size_t reused = 0;          // masks found among the recent states
  size_t escaped_walked = 0;  // escaped tokens walked through real stacks
  size_t max_stacks = 0;      // largest matcher state seen
};

class GrammarConstraint final : public TokenConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<const CompiledGrammar> g);

  void mask(std::span<float> logits) override;
  Status accept(int32_t token) override;
  bool complete() const override;
  // Walks the matcher ahead from a copy of the state, then puts the state back (the masks it
  // met stay among the recent ones: the steps that check the draft find them there).
  ForcedRun forced(int max, bool guess_text = false) override;

  struct Allowed {
    std::vector<uint64_t> bits;  // by token id
    bool eog = false;            // end of generation
    bool test(int32_t t) const { return (bits[size_t(t) >> 6] >> (t & 63)) & 1; }
    size_t count() const;
    int32_t only() const;  // the one token allowed, -1 unless exactly one
  };
  // The longest allowed token when every allowed token is a prefix of it (and at most 64 are
  // allowed); else -1.
  int32_t longest_of_one_text(const Allowed& a) const;
  // The tokens allowed now (end of generation apart).
  const Allowed& allowed();
  // Reads text as if tokens had written it (a forced prefix; tests).
  Status accept_text(std::string_view text);
  bool ended() const { return ended_; }
  const ConstraintStats& stats() const { return stats_; }
  const CompiledGrammar& compiled() const { return *g_; }

 private:
  struct Entry {
    std::vector<int32_t> state;
    Allowed allowed;
    uint64_t used = 0;
  };
  void compute(Allowed& a);
  Status advance(std::string_view bytes, const char* what, int32_t token);

  std::shared_ptr<const CompiledGrammar> g_;
  Matcher m_;
  TokenWalk walk_;
  std::vector<int32_t> state_, next_, scratch_;
  bool ended_ = false;
  std::vector<Entry> recent_;
  int current_ = -1;  // the entry of state_, -1 when not looked up yet
  uint64_t clock_ = 0;
  ConstraintStats stats_;
};

}  // namespace kamera::grammar
