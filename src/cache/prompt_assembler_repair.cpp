// PromptAssembler's repair budget: which segments held from another context are recomputed in
// context instead (cache/repair_plan.h), and the report of the runs that hold them.
#include "cache/prompt_assembler.h"
#include "cache/repair_plan.h"

namespace kamera {

// Every hit but rows from the very same antecedents is a candidate; with a budget above 0 the
// chosen ones get their estimate in a.repair (the others -1), and a.repaired their tokens.
void PromptAssembler::plan_repair(const PromptPlan& plan,
                                  const std::vector<std::optional<SegmentIndex::Hit>>& hits,
                                  Assembly& a) const {
  std::vector<RepairCandidate> c;
  for (size_t i = 0; i < hits.size(); ++i) {
    const auto& h = hits[i];
    if (!h || (h->match == SegmentIndex::Match::Exact && h->rows)) continue;
    c.push_back({i, plan.segments[i].span.size(), deficit_estimate(*h, i)});
    a.repair_candidates += c.back().tokens;
  }
  if (plan.reuse_budget <= 0 || plan.policy != ReusePolicy::Patch || c.empty()) return;
  const std::vector<size_t> chosen = choose_repairs(c, plan.reuse_budget);
  if (chosen.empty()) return;
  a.repair.assign(plan.segments.size(), -1.0);
  for (size_t k : chosen) {
    a.repair[c[k].segment] = c[k].estimate;
    a.repaired += c[k].tokens;
  }
}

// Tokens [begin, end) prefilled in one run from position pos: one span, or with segments the
// repair chose among them, a span of each of those (its id, estimate) and one of each stretch
// between.
void PromptAssembler::report_run(const PromptPlan& plan, Assembly& a, int begin, int end,
                                 int32_t pos) const {
  int from = begin;
  auto plain = [&](int to) {
    if (to > from)
      a.spans.push_back({std::nullopt, to - from, pos + (from - begin), SpanSource::Recomputed});
    from = std::max(from, to);
  };
  for (size_t i = 0; i < a.repair.size() && i < plan.segments.size(); ++i) {
    const PromptSegment& s = plan.segments[i];
    if (a.repair[i] < 0 || s.span.end <= from || s.span.begin >= end) continue;
    plain(s.span.begin);
    const int to = std::min(end, s.span.end);
    ServedSegment r{s.id, to - from, pos + (from - begin), SpanSource::Recomputed};
    r.repair_estimate = a.repair[i];
    r.repaired = true;
    a.spans.push_back(r);
    from = to;
  }
  plain(end);
}

// Where the last segment the repair chose ends (0: none chosen).
int PromptAssembler::repair_end(const PromptPlan& plan, const Assembly& a) {
  int end = 0;
  for (size_t i = 0; i < a.repair.size() && i < plan.segments.size(); ++i)
    if (a.repair[i] >= 0) end = plan.segments[i].span.end;
  return end;
}

}  // namespace kamera
