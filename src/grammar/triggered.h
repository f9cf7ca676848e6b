// A grammar that starts when the output reaches a trigger: free text until the model writes the
// trigger (a tool call's opening marker, tool_choice "auto" with a strict function), then the
// grammar from the trigger on (the trigger text is read by the grammar first). Before the
// trigger nothing is masked and the text may end at any point.
//
// If the token that completes the trigger also carries bytes the grammar refuses, the constraint
// gives up (broken(): nothing is masked from then on) rather than sample from an impossible
// state; the output parser then sees a malformed call.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "grammar/constraint.h"

namespace kamera::grammar {

class TriggeredConstraint final : public TokenConstraint {
 public:
  TriggeredConstraint(std::shared_ptr<const CompiledGrammar> g, std::string trigger);

  void mask(std::span<float> logits) override;
  Status accept(int32_t token) override;
  bool complete() const override;
  // The grammar's forced tokens once the trigger started it (none before: free text).
  ForcedRun forced(int max, bool guess_text = false) override;

  bool active() const { return inner_.has_value(); }
  bool broken() const { return broken_; }

 private:
  std::shared_ptr<const CompiledGrammar> g_;
  std::string trigger_, text_;
  std::optional<GrammarConstraint> inner_;
  bool broken_ = false;
};

}  // namespace kamera::grammar
