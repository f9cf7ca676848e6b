// The JSON building blocks of grammars: whitespace, strings, numbers within bounds, and any
// JSON value or object, as rules of one Grammar shared by everything compiled into it (one
// string rule serves every unbounded string, so its positions' token masks are computed once).
//
// What kamera writes, a subset of JSON chosen so that generations stay finite and parse
// everywhere:
//   - whitespace between tokens: nothing, one space, or a newline and up to 20 spaces or tabs;
//     or, in the compact layout (forced tool-call arguments), the one form templates write with
//     tojson: no whitespace but one space after each ',' and ':' ({"a": 1, "b": [2, 3]}), so no
//     token is spent on layout;
//   - strings: well-formed UTF-8 (no overlong forms, no surrogates), no raw control characters,
//     the escapes \" \\ \/ \b \f \n \r \t and \uXXXX (a surrogate only as a high-low pair);
//     lengths count code points (an escape is one), as JSON Schema's minLength does;
//   - numbers as grammar/json_number.h writes them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "grammar/budget.h"
#include "grammar/expr.h"
#include "grammar/grammar.h"
#include "grammar/json_number.h"

namespace kamera::grammar {

enum class Layout { Free, Compact };

class JsonRules {
 public:
  // Every rule compiled is charged to `budget` (null: a default budget of its own).
  explicit JsonRules(Grammar& g, Budget* budget = nullptr, Layout layout = Layout::Free)
      : g_(g),
        own_(budget ? nullptr : std::make_unique<Budget>()),
        budget_(budget ? *budget : *own_),
        layout_(layout) {}
  Grammar& grammar() { return g_; }
  Budget& budget() { return budget_; }

  // Whitespace after an opening and before a closing bracket (and before the document); the
  // separators with their whitespace.
  Expr ws() const;
  Expr comma() const;
  Expr colon() const;
  static Expr string_char();  // one character of a string's content
  // Rules (shared per arguments): a string of min_len..max_len characters (max_len < 0: any).
  Result<int32_t> string(int min_len = 0, int max_len = -1);
  Result<int32_t> number(const NumberBounds& b);
  Result<int32_t> any_value();
  Result<int32_t> any_object();
  // A new rule holding `e`.
  Result<int32_t> rule(std::string name, const Expr& e);

  static constexpr int kMaxLength = 1024;  // minLength / maxLength unroll up to this

 private:
  Status declare_values();

  Grammar& g_;
  std::unique_ptr<Budget> own_;
  Budget& budget_;
  Layout layout_;
  std::map<std::pair<int, int>, int32_t> strings_;
  std::map<std::string, int32_t> numbers_;
  int32_t value_ = -1, object_ = -1;
};

}  // namespace kamera::grammar
