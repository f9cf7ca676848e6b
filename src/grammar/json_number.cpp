#include "grammar/json_number.h"

#include <charconv>
#include <cmath>
#include <map>

namespace kamera::grammar {

Decimal Decimal::magnitude() const {
  Decimal d = *this;
  d.negative = false;
  return d;
}

std::string Decimal::text() const {
  std::string s = negative ? "-" : "";
  s += int_digits;
  if (!frac_digits.empty()) s += "." + frac_digits;
  return s;
}

std::optional<Decimal> Decimal::parse(std::string_view t) {
  size_t i = 0;
  Decimal d;
  const bool neg = i < t.size() && t[i] == '-';
  if (neg) ++i;
  std::string digits;
  long point = 0;
  auto read_digits = [&](bool count) {
    size_t n = 0;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i, ++n) {
      digits += t[i];
      if (count) ++point;
    }
    return n;
  };
  if (read_digits(true) == 0) return std::nullopt;
  if (i < t.size() && t[i] == '.') {
    ++i;
    if (read_digits(false) == 0) return std::nullopt;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    long e = 0;
    auto [p, ec] =
        std::from_chars(t.data() + i + (i < t.size() && t[i] == '+'), t.data() + t.size(), e);
    if (ec != std::errc() || p != t.data() + t.size() || std::labs(e) > 100000) return std::nullopt;
    point += e;
    i = t.size();
  }
  if (i != t.size()) return std::nullopt;
  size_t lead = 0;
  while (lead < digits.size() && digits[lead] == '0') ++lead;
  digits.erase(0, lead);
  point -= long(lead);
  while (!digits.empty() && digits.back() == '0' && long(digits.size()) > point) digits.pop_back();
  if (digits.empty()) return d;  // zero, never negative
  d.negative = neg;
  if (point <= 0) {
    d.frac_digits = std::string(size_t(-point), '0') + digits;
  } else {
    if (long(digits.size()) < point) digits.append(size_t(point) - digits.size(), '0');
    d.int_digits = digits.substr(0, size_t(point));
    d.frac_digits = digits.substr(size_t(point));
  }
  return d;
}

std::optional<Decimal> Decimal::from_json(const nlohmann::json& v, bool exact) {
  if (v.is_number_integer()) return parse(v.dump());
  const double x = v.get<double>();
  if (!std::isfinite(x)) return std::nullopt;
  if (exact && x == std::floor(x)) {  // an integral double: its exact digits
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.0f", x);
    return parse(buf);
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  if (ec != std::errc()) return std::nullopt;
  return parse(std::string_view(buf, size_t(end - buf)));
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int sign = a.negative ? -1 : 1;
  if (a.int_digits.size() != b.int_digits.size())
    return a.int_digits.size() < b.int_digits.size() ? -sign : sign;
  if (int c = a.int_digits.compare(b.int_digits); c != 0) return c < 0 ? -sign : sign;
  if (int c = a.frac_digits.compare(b.frac_digits); c != 0) return c < 0 ? -sign : sign;
  return 0;
}

namespace {

constexpr uint8_t LT = 0, EQ = 1, GT = 2;
enum Phase : uint8_t { Start, Zero, Int, Dot, Frac };

// One bound of a magnitude: nullptr when absent (then its comparison is fixed: a missing lower
// bound is always "greater", a missing upper one always "less").
struct Bound {
  const Decimal* d = nullptr;
  bool exclusive = false;
};

struct MagState {
  uint8_t phase = Start, lo = EQ, hi = EQ, n_int = 0, n_frac = 0;
  uint32_t key() const {
    return uint32_t(phase) | uint32_t(lo) << 3 | uint32_t(hi) << 5 | uint32_t(n_int) << 7 |
           uint32_t(n_frac) << 13;
  }
};

// Reads the magnitude part of a number (after any '-') and compares it with both bounds.
class MagnitudeDfa {
 public:
  MagnitudeDfa(bool integer, Bound lo, Bound hi) : integer_(integer), lo_(lo), hi_(hi) {}

  MagState start() const {
    MagState s;
    s.lo = lo_.d ? EQ : GT;
    s.hi = hi_.d ? EQ : LT;
    return s;
  }
  std::optional<MagState> step(MagState s, char c) const;
  bool accepts(const MagState& s) const;

 private:
  // The integer part compared with a bound, once it has ended.
  uint8_t int_result(const MagState& s, uint8_t lex, const Bound& b) const {
    if (!b.d) return lex;
    if (s.phase == Zero) return b.d->int_digits == "0" ? EQ : LT;
    const size_t n = b.d->int_digits.size();
    return s.n_int < n ? LT : s.n_int > n ? GT : lex;
  }
  static uint8_t digit_cmp(uint8_t cur, char c, const std::string& digits, size_t k, bool pad) {
    if (cur != EQ) return cur;
    if (k >= digits.size() && !pad) return cur;
    const char b = k < digits.size() ? digits[k] : '0';
    return c < b ? LT : c > b ? GT : EQ;
  }
  uint8_t final_cmp(const MagState& s, uint8_t cur, const Bound& b) const {
    if (!b.d) return cur;
    const uint8_t c = s.phase == Frac ? cur : int_result(s, cur, b);
    return c == EQ && s.n_frac < b.d->frac_digits.size() ? LT : c;
  }
  size_t max_int() const { return integer_ ? 18 : 15; }

  bool integer_;
  Bound lo_, hi_;
};

std::optional<MagState> MagnitudeDfa::step(MagState s, char c) const {
  const bool digit = c >= '0' && c <= '9';
  auto int_digit = [&](MagState t) -> std::optional<MagState> {
    if (t.n_int >= max_int()) return std::nullopt;
    if (lo_.d) t.lo = digit_cmp(t.lo, c, lo_.d->int_digits, t.n_int, false);
    if (hi_.d) t.hi = digit_cmp(t.hi, c, hi_.d->int_digits, t.n_int, false);
    ++t.n_int;
    t.phase = Int;
    return t;
  };
  switch (s.phase) {
    case Start:
      if (c == '0') {
        s.phase = Zero;
        return s;
      }
      return digit ? int_digit(s) : std::nullopt;
    case Zero:
    case Int:
      if (digit && s.phase == Int) return int_digit(s);
      if (c != '.' || integer_) return std::nullopt;
      s.lo = int_result(s, s.lo, lo_);
      s.hi = int_result(s, s.hi, hi_);
      s.phase = Dot;
      return s;
    case Dot:
    case Frac:
      if (!digit || s.n_int + s.n_frac >= 15) return std::nullopt;
      if (lo_.d) s.lo = digit_cmp(s.lo, c, lo_.d->frac_digits, s.n_frac, true);
      if (hi_.d) s.hi = digit_cmp(s.hi, c, hi_.d->frac_digits, s.n_frac, true);
      ++s.n_frac;
      s.phase = Frac;
      return s;
  }
  return std::nullopt;
}

bool MagnitudeDfa::accepts(const MagState& s) const {
  if (s.phase == Start || s.phase == Dot) return false;
  const uint8_t lo = final_cmp(s, s.lo, lo_), hi = final_cmp(s, s.hi, hi_);
  return (lo == GT || (lo == EQ && !lo_.exclusive)) && (hi == LT || (hi == EQ && !hi_.exclusive));
}

// Explores a magnitude automaton into `a`, from state `from` (an existing state of `a`).
// Returns whether some state accepts.
bool explore(const MagnitudeDfa& dfa, Automaton& a, int32_t from) {
  std::map<uint32_t, int32_t> ids;
  std::vector<std::pair<MagState, int32_t>> todo = {{dfa.start(), from}};
  ids[dfa.start().key()] = from;
  bool any = false;
  while (!todo.empty()) {
    auto [s, id] = todo.back();
    todo.pop_back();
    any = any || dfa.accepts(s);
    a.states[size_t(id)].final = dfa.accepts(s);
    for (char c : std::string_view("0123456789.")) {
      auto t = dfa.step(s, c);
      if (!t) continue;
      auto [it, fresh] = ids.try_emplace(t->key(), 0);
      if (fresh) {
        it->second = a.add_state();
        todo.push_back({*t, it->second});
      }
      a.add_bytes(id, it->second, uint8_t(c), uint8_t(c));
    }
  }
  return any;
}

}  // namespace

Result<Automaton> number_automaton(const NumberBounds& b) {
  const Decimal zero;
  const bool lo_neg = b.lo && b.lo->negative, hi_neg = b.hi && b.hi->negative;
  Automaton a;
  const int32_t start = a.add_state();
  bool any = false;
  // x >= 0: magnitudes in [max(lo, 0), hi].
  if (!hi_neg) {
    Decimal lo_mag = b.lo && !lo_neg ? *b.lo : zero;
    Bound lo{&lo_mag, b.lo && !lo_neg ? b.lo_exclusive : false};
    Decimal hi_mag = b.hi ? *b.hi : zero;
    Bound hi{b.hi ? &hi_mag : nullptr, b.hi_exclusive};
    any = explore(MagnitudeDfa(b.integer, lo, hi), a, start) || any;
  }
  // x < 0: "-" and magnitudes in (max(-hi, 0), -lo], never zero.
  if (!b.lo || lo_neg) {
    const int32_t minus = a.add_state();
    a.add_bytes(start, minus, '-', '-');
    Decimal lo_mag = hi_neg ? b.hi->magnitude() : zero;
    Bound lo{&lo_mag, hi_neg ? b.hi_exclusive : true};
    Decimal hi_mag = b.lo ? b.lo->magnitude() : zero;
    Bound hi{b.lo ? &hi_mag : nullptr, b.lo_exclusive};
    any = explore(MagnitudeDfa(b.integer, lo, hi), a, minus) || any;
  }
  if (!any)
    return make_error(ErrorCode::InvalidArgument, "no {} kamera writes lies within the bounds",
                      b.integer ? "integer" : "number");
  return a;
}

}  // namespace kamera::grammar
