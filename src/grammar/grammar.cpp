#include "grammar/grammar.h"

#include <algorithm>
#include <map>

namespace kamera::grammar {

int32_t Automaton::add_state(bool final) {
  states.push_back(State{final, {}});
  return int32_t(states.size() - 1);
}

void Automaton::add_bytes(int32_t from, int32_t to, uint8_t lo, uint8_t hi) {
  states[size_t(from)].edges.push_back(Edge{to, -1, lo, hi});
}

void Automaton::add_call(int32_t from, int32_t to, int32_t rule) {
  states[size_t(from)].edges.push_back(Edge{to, rule, 0, 0});
}

int32_t Grammar::declare(std::string name) {
  rules_.push_back(Rule{std::move(name), -1, 0});
  return int32_t(rules_.size() - 1);
}

Status Grammar::define(int32_t rule, const Automaton& a) {
  if (rule < 0 || rule >= n_rules())
    return make_error(ErrorCode::InvalidArgument, "grammar: rule {} was not declared", rule);
  Rule& r = rules_[size_t(rule)];
  if (r.start >= 0)
    return make_error(ErrorCode::InvalidArgument, "grammar: rule '{}' is defined twice", r.name);
  if (a.states.empty())
    return make_error(ErrorCode::InvalidArgument, "grammar: rule '{}' has no states", r.name);
  const int32_t base = n_states();
  r.start = base;
  r.n_states = int32_t(a.states.size());
  for (const Automaton::State& as : a.states) {
    State s;
    s.rule = rule;
    s.final = as.final;
    for (const Automaton::Edge& e : as.edges) {
      if (e.to < 0 || e.to >= r.n_states)
        return make_error(ErrorCode::InvalidArgument, "grammar: rule '{}' has an edge to state {}",
                          r.name, e.to);
      if (e.rule >= 0)
        s.calls.push_back(Call{e.rule, base + e.to});
      else if (e.lo <= e.hi)
        s.bytes.push_back(Edge{base + e.to, e.lo, e.hi});
    }
    states_.push_back(std::move(s));
  }
  return Status::Ok();
}

Status Grammar::check_calls() const {
  for (const Rule& r : rules_)
    if (r.start < 0)
      return make_error(ErrorCode::InvalidArgument, "grammar: rule '{}' is never defined", r.name);
  for (const State& s : states_)
    for (const Call& c : s.calls)
      if (c.rule < 0 || c.rule >= n_rules())
        return make_error(ErrorCode::InvalidArgument, "grammar: rule '{}' calls rule {}",
                          rules_[size_t(s.rule)].name, c.rule);
  return Status::Ok();
}

// Fixed point: a rule is nullable when its start reaches a final state through calls of
// nullable rules only.
std::vector<bool> Grammar::nullable_rules() const {
  std::vector<bool> nullable(rules_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (nullable[r]) continue;
      std::vector<int32_t> todo = {rules_[r].start};
      std::vector<bool> seen(size_t(rules_[r].n_states), false);
      seen[0] = true;
      bool found = false;
      while (!todo.empty() && !found) {
        const State& s = states_[size_t(todo.back())];
        todo.pop_back();
        found = s.final;
        for (const Call& c : s.calls) {
          const size_t local = size_t(c.to - rules_[r].start);
          if (nullable[size_t(c.rule)] && !seen[local]) {
            seen[local] = true;
            todo.push_back(c.to);
          }
        }
      }
      if (found) nullable[r] = changed = true;
    }
  }
  return nullable;
}

// The moves that read no byte: entering a called rule (s -> its start) and skipping a call of a
// nullable rule (s -> the call's return). A cycle among them is left recursion, or a loop of
// calls that read nothing: the matcher's closure would never end.
Status Grammar::check_left_recursion() const {
  const std::vector<bool> nullable = nullable_rules();
  const size_t n = states_.size();
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<int32_t, size_t>> path;
  auto next_of = [&](int32_t s, size_t i, int32_t& out) {
    const auto& calls = states_[size_t(s)].calls;
    const size_t k = i / 2;
    if (k >= calls.size()) return false;
    if (i % 2 == 0)
      out = rules_[size_t(calls[k].rule)].start;
    else
      out = nullable[size_t(calls[k].rule)] ? calls[k].to : -1;
    return true;
  };
  for (size_t root = 0; root < n; ++root) {
    if (color[root]) continue;
    path.push_back({int32_t(root), 0});
    color[root] = 1;
    while (!path.empty()) {
      auto& [s, i] = path.back();
      int32_t t = -1;
      if (!next_of(s, i++, t)) {
        color[size_t(s)] = 2;
        path.pop_back();
        continue;
      }
      if (t < 0 || color[size_t(t)] == 2) continue;
      if (color[size_t(t)] == 1)
        return make_error(ErrorCode::InvalidArgument,
                          "grammar: rule '{}' can call itself before reading a byte (left "
                          "recursion, or a loop of calls that read nothing)",
                          rules_[size_t(states_[size_t(t)].rule)].name);
      color[size_t(t)] = 1;
      path.push_back({t, 0});
    }
  }
  return Status::Ok();
}

// Keeps only edges into states that can still reach a final state; a call of a rule that accepts
// nothing is dropped. Fixed point over the rules that accept something.
void Grammar::trim() {
  const size_t n = states_.size();
  std::vector<bool> live(n, false), productive(rules_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = n; s-- > 0;) {
      if (live[s]) continue;
      const State& st = states_[s];
      bool l = st.final;
      for (const Edge& e : st.bytes) l = l || live[size_t(e.to)];
      for (const Call& c : st.calls) l = l || (productive[size_t(c.rule)] && live[size_t(c.to)]);
      if (l) live[s] = changed = true;
    }
    for (size_t r = 0; r < rules_.size(); ++r)
      if (!productive[r] && live[size_t(rules_[r].start)]) productive[r] = changed = true;
  }
  for (State& st : states_) {
    std::erase_if(st.bytes, [&](const Edge& e) { return !live[size_t(e.to)]; });
    std::erase_if(st.calls, [&](const Call& c) {
      return !productive[size_t(c.rule)] || !live[size_t(c.to)];
    });
    st.tail = st.final && st.bytes.empty() && st.calls.empty();
  }
}

// Each state's edges become its byte table; the class arrays are shared between states that
// split the bytes alike (every count of a bounded repetition does), and the edges are dropped.
Status Grammar::build_tables() {
  tables_.clear();
  classes_.clear();
  target_sets_.clear();
  target_pool_.clear();
  std::map<std::array<uint8_t, 256>, int32_t> class_ids;
  for (State& st : states_) {
    st.byte_table = -1;
    if (st.bytes.empty()) continue;
    std::array<uint8_t, 256> cls{};
    std::map<std::vector<int32_t>, uint8_t> ids;
    ByteTable t{0, int32_t(target_sets_.size()), 0};
    for (int b = 0; b < 256; ++b) {
      std::vector<int32_t> to;
      for (const Edge& e : st.bytes)
        if (e.lo <= b && b <= e.hi) to.push_back(e.to);
      if (to.empty()) continue;
      std::sort(to.begin(), to.end());
      to.erase(std::unique(to.begin(), to.end()), to.end());
      auto [it, fresh] = ids.try_emplace(to, uint8_t(t.n + 1));
      if (fresh) {
        if (t.n == 255)
          return make_error(ErrorCode::Unsupported,
                            "grammar: a state of rule '{}' reads bytes "
                            "into more than 255 different target sets",
                            rules_[size_t(st.rule)].name);
        target_sets_.push_back(Range{int32_t(target_pool_.size()), int32_t(to.size())});
        target_pool_.insert(target_pool_.end(), to.begin(), to.end());
        ++t.n;
      }
      cls[size_t(b)] = it->second;
    }
    auto [c, fresh] = class_ids.try_emplace(cls, int32_t(classes_.size()));
    if (fresh) classes_.push_back(cls);
    t.classes = c->second;
    st.byte_table = int32_t(tables_.size());
    tables_.push_back(t);
    std::vector<Edge>().swap(st.bytes);
  }
  return Status::Ok();
}

size_t Grammar::memory_bytes() const {
  size_t n = sizeof(*this) + states_.capacity() * sizeof(State) + rules_.capacity() * sizeof(Rule) +
             tables_.capacity() * sizeof(ByteTable) + classes_.capacity() * 256 +
             target_sets_.capacity() * sizeof(Range) + target_pool_.capacity() * sizeof(int32_t);
  for (const State& st : states_)
    n += st.bytes.capacity() * sizeof(Edge) + st.calls.capacity() * sizeof(Call);
  for (const Rule& r : rules_) n += r.name.capacity();
  return n;
}

Status Grammar::finish(int32_t root) {
  if (root < 0 || root >= n_rules())
    return make_error(ErrorCode::InvalidArgument, "grammar: root rule {} was not declared", root);
  if (Status st = check_calls(); !st.ok()) return st;
  trim();
  const State& start = states_[size_t(rules_[size_t(root)].start)];
  if (!start.final && start.bytes.empty() && start.calls.empty())
    return make_error(ErrorCode::InvalidArgument, "grammar: rule '{}' accepts nothing",
                      rules_[size_t(root)].name);
  if (Status st = check_left_recursion(); !st.ok()) return st;
  root_ = root;
  return build_tables();
}

}  // namespace kamera::grammar
