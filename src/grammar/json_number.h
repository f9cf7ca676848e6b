// JSON numbers within bounds, as one deterministic automaton: the decimal strings
// -?(0|[1-9][0-9]*)(.[0-9]+)? whose value lies in [minimum, maximum] (each bound inclusive or
// exclusive, either absent), read left to right while comparing their digits with the bounds'.
//
// The automaton is built by exploring a step function over (phase, digits read, comparison so
// far with each bound); states that cannot end inside the bounds are trimmed by the grammar, so
// a constrained generation never writes a prefix it cannot complete.
//
// What kamera writes (a subset of the numbers that validate, chosen so that every document
// validates exactly as a float-parsing validator such as Python's jsonschema decides):
//   - no exponent, no "-0";
//   - integers: up to 18 digits (an int64);
//   - numbers: up to 15 digits in all (int64-free and exact as doubles: a decimal of at most 15
//     significant digits compares with a bound's shortest round-trip form as its double does).
// Bounds of integers compare against the bound's exact value (Python compares an int with a
// float exactly), bounds of numbers against its shortest round-trip decimal.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/grammar.h"

namespace kamera::grammar {

// A finite decimal: digits of the integer part ("0" or no leading zero) and of the fraction (no
// trailing zero). Zero is never negative.
struct Decimal {
  bool negative = false;
  std::string int_digits = "0";
  std::string frac_digits;

  bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
  Decimal magnitude() const;
  std::string text() const;
  // "-12.5", "3e-7", "1E+20": a JSON number's text.
  static std::optional<Decimal> parse(std::string_view text);
  // A JSON number: integers exactly; a double as its shortest round-trip text, or as its exact
  // binary value when `exact`. nullopt for a non-finite double.
  static std::optional<Decimal> from_json(const nlohmann::json& v, bool exact);
};

// -1, 0, 1 as a <, ==, > b.
int compare(const Decimal& a, const Decimal& b);

struct NumberBounds {
  bool integer = false;
  std::optional<Decimal> lo, hi;
  bool lo_exclusive = false, hi_exclusive = false;
};

// The automaton of the numbers inside `b`; an error when no number kamera writes is inside.
Result<Automaton> number_automaton(const NumberBounds& b);

}  // namespace kamera::grammar
