// What compiling one request's grammars may spend, checked while the work runs: automaton states
// built (the NFA and DFA states of grammar/expr.h, which is where a schema's time and memory
// go), CPU seconds of the compiling thread, and a cancellation check (the client left, the server
// is stopping). A compile step charges the budget; past a limit it fails with an error naming the
// limit, and the budget remembers why it stopped, so a caller tells "the schema is refused" from
// "the request spent its budget" by asking it (the second is never worked around, e.g. by
// loosening a tool's parameters to any object).
#pragma once

#include <cstddef>
#include <functional>

#include "core/status.h"

namespace kamera::grammar {

struct BudgetLimits {
  // 300,000 states: a string of maxLength 1024 (the longest the subset takes) charges about
  // 203,000, NFA and DFA together; tests/unit/grammar/test_grammar_budget.cpp bounds what a
  // refusal costs (docs/GRAMMAR.md, "What a compile may cost").
  size_t max_states = 300000;
  double max_cpu_seconds = 3.0;  // of the compiling thread (docs/GRAMMAR.md: why 3)
};

class Budget {
 public:
  enum class Stop { None, States, Time, Cancelled };

  explicit Budget(BudgetLimits limits = {}, std::function<bool()> cancelled = nullptr);

  // `n` states built: fails past max_states, and (every so often) past the time or when
  // cancelled.
  Status charge_states(size_t n = 1);
  // `n` expression nodes made from a request's text (a literal's bytes, a schema): each becomes
  // at least two states once compiled, so more than max_states / 2 fail at once, before the
  // expressions take the memory their states would.
  Status charge_nodes(size_t n);
  // `units` of work that builds no state (a scan of a state's edges): checks the time and the
  // cancellation once enough has accumulated.
  Status charge_work(size_t units);

  Stop stopped() const { return stop_; }
  size_t states() const { return states_; }
  double cpu_seconds() const;  // of this thread since the budget was made
  const BudgetLimits& limits() const { return limits_; }

 private:
  Status check();
  Status fail(Stop why);

  BudgetLimits limits_;
  std::function<bool()> cancelled_;
  double cpu_start_ = 0;
  size_t states_ = 0;
  size_t nodes_ = 0;
  size_t work_ = 0;  // since the last check
  Stop stop_ = Stop::None;
};

}  // namespace kamera::grammar
