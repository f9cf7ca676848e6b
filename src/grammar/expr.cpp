#include "grammar/expr.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

namespace kamera::grammar {

struct Expr::Node {
  enum Kind { Empty, Bytes, Call, Seq, Alt, Repeat } kind = Empty;
  ByteSet set;
  int32_t rule = -1;
  int min = 0, max = 0;
  std::vector<Expr> parts;
};

ByteSet byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(size_t(b));
  return s;
}

Expr::Expr() : node_(std::make_shared<Node>()) {}

Expr Expr::bytes(const ByteSet& set) {
  auto n = std::make_shared<Node>();
  n->kind = Node::Bytes;
  n->set = set;
  return Expr(std::move(n));
}

Expr Expr::lit(std::string_view text) {
  std::vector<Expr> parts;
  for (char c : text) parts.push_back(range(uint8_t(c), uint8_t(c)));
  return seq(std::move(parts));
}

Expr Expr::call(int32_t rule) {
  auto n = std::make_shared<Node>();
  n->kind = Node::Call;
  n->rule = rule;
  return Expr(std::move(n));
}

Expr Expr::seq(std::vector<Expr> parts) {
  if (parts.size() == 1) return parts[0];
  auto n = std::make_shared<Node>();
  n->kind = Node::Seq;
  n->parts = std::move(parts);
  return Expr(std::move(n));
}

Expr Expr::alt(std::vector<Expr> options) {
  if (options.size() == 1) return options[0];
  auto n = std::make_shared<Node>();
  n->kind = Node::Alt;
  n->parts = std::move(options);
  return Expr(std::move(n));
}

Expr Expr::repeat(Expr e, int min, int max) {
  auto n = std::make_shared<Node>();
  n->kind = Node::Repeat;
  n->min = std::max(min, 0);
  n->max = max;
  n->parts = {std::move(e)};
  return Expr(std::move(n));
}

namespace {

// Thompson automaton: states with empty moves, byte-set edges and call edges. Each state is
// charged to the budget as it is made; once the budget fails, building stops.
class Nfa {
 public:
  explicit Nfa(Budget& budget) : budget_(budget) {}
  struct State {
    std::vector<int32_t> eps;
    std::vector<std::pair<int32_t, int32_t>> sets;   // (index in sets_, target)
    std::vector<std::pair<int32_t, int32_t>> calls;  // (rule, target)
  };
  std::vector<State> states;
  std::vector<ByteSet> sets;
  Status status;

  int32_t add() {
    if (status.ok()) status = budget_.charge_states();
    states.emplace_back();
    return int32_t(states.size() - 1);
  }
  // Builds `n` between fresh states; returns (start, end).
  std::pair<int32_t, int32_t> build(const Expr::Node& n);

 private:
  std::pair<int32_t, int32_t> build_repeat(const Expr::Node& n);
  Budget& budget_;
};

}  // namespace

std::pair<int32_t, int32_t> Nfa::build(const Expr::Node& n) {
  if (!status.ok()) return {0, 0};
  const int32_t s = add(), e = add();
  switch (n.kind) {
    case Expr::Node::Empty:
      states[size_t(s)].eps.push_back(e);
      break;
    case Expr::Node::Bytes:
      sets.push_back(n.set);
      states[size_t(s)].sets.push_back({int32_t(sets.size() - 1), e});
      break;
    case Expr::Node::Call:
      states[size_t(s)].calls.push_back({n.rule, e});
      break;
    case Expr::Node::Seq: {
      int32_t at = s;
      for (const Expr& p : n.parts) {
        auto [ps, pe] = build(p.node());
        states[size_t(at)].eps.push_back(ps);
        at = pe;
      }
      states[size_t(at)].eps.push_back(e);
      break;
    }
    case Expr::Node::Alt:
      for (const Expr& p : n.parts) {
        auto [ps, pe] = build(p.node());
        states[size_t(s)].eps.push_back(ps);
        states[size_t(pe)].eps.push_back(e);
      }
      break;
    case Expr::Node::Repeat: {
      auto [rs, re] = build_repeat(n);
      states[size_t(s)].eps.push_back(rs);
      states[size_t(re)].eps.push_back(e);
      break;
    }
  }
  return {s, e};
}

std::pair<int32_t, int32_t> Nfa::build_repeat(const Expr::Node& n) {
  const Expr::Node& body = n.parts[0].node();
  const int32_t s = add();
  int32_t at = s;
  for (int i = 0; i < n.min && status.ok(); ++i) {
    auto [ps, pe] = build(body);
    states[size_t(at)].eps.push_back(ps);
    at = pe;
  }
  const int32_t e = add();
  if (n.max < 0) {  // at -> body -> at, or leave
    auto [ps, pe] = build(body);
    states[size_t(at)].eps.push_back(ps);
    states[size_t(pe)].eps.push_back(at);
  } else {
    for (int i = n.min; i < n.max && status.ok(); ++i) {  // each optional copy may end the run
      auto [ps, pe] = build(body);
      states[size_t(at)].eps.push_back(ps);
      states[size_t(at)].eps.push_back(e);
      at = pe;
    }
  }
  states[size_t(at)].eps.push_back(e);
  return {s, e};
}

namespace {

struct SetHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ uint32_t(x)) * 1099511628211ull;
    return size_t(h);
  }
};

// Subset construction. The bytes a DFA state reads are first split into classes (bytes that
// every byte-set edge of the state either contains or not), so a class's successor set is
// computed once, not once per byte.
class SubsetBuilder {
 public:
  SubsetBuilder(const Nfa& nfa, int32_t end, Budget& budget)
      : nfa_(nfa), end_(end), budget_(budget) {}

  Result<Automaton> run(int32_t start) {
    intern(closure({start}));
    for (size_t d = 0; d < sets_.size() && status_.ok(); ++d) expand(d);
    if (!status_.ok()) return status_.error();
    return std::move(out_);
  }

 private:
  std::vector<int32_t> closure(std::vector<int32_t> todo) {
    std::vector<int32_t> out;
    if (seen_.size() < nfa_.states.size()) seen_.assign(nfa_.states.size(), 0);
    while (!todo.empty()) {
      const int32_t s = todo.back();
      todo.pop_back();
      if (seen_[size_t(s)] == stamp_) continue;
      seen_[size_t(s)] = stamp_;
      out.push_back(s);
      for (int32_t t : nfa_.states[size_t(s)].eps) todo.push_back(t);
    }
    ++stamp_;
    std::sort(out.begin(), out.end());
    if (status_.ok()) status_ = budget_.charge_work(out.size());
    return out;
  }

  int32_t intern(std::vector<int32_t> set) {
    auto [it, fresh] = ids_.try_emplace(std::move(set), int32_t(sets_.size()));
    if (fresh) {
      const bool final = std::binary_search(it->first.begin(), it->first.end(), end_);
      out_.add_state(final);
      sets_.push_back(&it->first);
      // A state costs its set too: a large set counts as the states its memory would hold.
      if (status_.ok()) status_ = budget_.charge_states(1 + it->first.size() / 32);
    }
    return it->second;
  }

  // cls[b]: the class of byte b among the edges' sets; returns the number of classes.
  static int byte_classes(const std::vector<const ByteSet*>& edge_sets,
                          std::array<uint16_t, 256>& cls) {
    cls.fill(0);
    int n = 1;
    for (const ByteSet* set : edge_sets) {
      std::array<int16_t, 512> split;  // (old class, in the set) -> new class
      split.fill(-1);
      int m = 0;
      for (int b = 0; b < 256; ++b) {
        int16_t& to = split[size_t(cls[size_t(b)]) * 2 + (set->test(size_t(b)) ? 1 : 0)];
        if (to < 0) to = int16_t(m++);
        cls[size_t(b)] = uint16_t(to);
      }
      n = m;
    }
    return n;
  }

  void expand_bytes(size_t d) {
    std::vector<std::pair<const ByteSet*, int32_t>> edges;  // (set, target)
    for (int32_t s : *sets_[d])
      for (const auto& [set, t] : nfa_.states[size_t(s)].sets)
        edges.push_back({&nfa_.sets[size_t(set)], t});
    if (edges.empty()) return;
    std::vector<const ByteSet*> edge_sets;
    for (const auto& e : edges) edge_sets.push_back(e.first);
    std::array<uint16_t, 256> cls;
    const int n = byte_classes(edge_sets, cls);
    std::vector<int32_t> to_of_class(size_t(n), -2);  // -2: not computed, -1: no successor
    std::vector<int32_t> to_of_byte(256, -1);
    for (int b = 0; b < 256 && status_.ok(); ++b) {
      int32_t& to = to_of_class[cls[size_t(b)]];
      if (to == -2) {
        std::vector<int32_t> next;
        for (const auto& [set, t] : edges)
          if (set->test(size_t(b))) next.push_back(t);
        to = next.empty() ? -1 : intern(closure(std::move(next)));
      }
      to_of_byte[size_t(b)] = to;
    }
    if (status_.ok()) status_ = budget_.charge_work(256 * edges.size() / 64 + 1);
    for (int b = 0; b < 256;) {  // runs of bytes with one target become one edge
      int c = b;
      while (c + 1 < 256 && to_of_byte[size_t(c + 1)] == to_of_byte[size_t(b)]) ++c;
      if (to_of_byte[size_t(b)] >= 0)
        out_.add_bytes(int32_t(d), to_of_byte[size_t(b)], uint8_t(b), uint8_t(c));
      b = c + 1;
    }
  }

  void expand(size_t d) {
    expand_bytes(d);
    std::map<int32_t, std::vector<int32_t>> by_rule;
    for (int32_t s : *sets_[d])
      for (const auto& [rule, t] : nfa_.states[size_t(s)].calls) by_rule[rule].push_back(t);
    for (auto& [rule, next] : by_rule) out_.add_call(int32_t(d), intern(closure(next)), rule);
  }

  const Nfa& nfa_;
  int32_t end_;
  Budget& budget_;
  Status status_;
  std::unordered_map<std::vector<int32_t>, int32_t, SetHash> ids_;
  std::vector<const std::vector<int32_t>*> sets_;  // the keys of ids_, by DFA state
  std::vector<uint32_t> seen_;
  uint32_t stamp_ = 1;
  Automaton out_;
};

}  // namespace

Result<Automaton> Expr::compile(Budget& budget) const {
  Nfa nfa(budget);
  auto [s, e] = nfa.build(*node_);
  if (!nfa.status.ok()) return nfa.status.error();
  return SubsetBuilder(nfa, e, budget).run(s);
}

Result<Automaton> Expr::compile(size_t max_states) const {
  Budget budget(BudgetLimits{max_states, 1e9});
  auto a = compile(budget);
  if (!a.ok() && budget.stopped() == Budget::Stop::States)
    return make_error(ErrorCode::Unsupported,
                      "grammar: an expression unrolls into more than {} states", max_states);
  return a;
}

}  // namespace kamera::grammar
