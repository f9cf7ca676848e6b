// Jinja syntax tree: expressions and statements, as the parser builds them and the evaluator
// walks them. Each node keeps its source position for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace kamera::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind : uint8_t {
  Literal,  // value
  Name,     // name
  List,     // args: the items
  Tuple,    // args: the items (evaluates to a list)
  Dict,     // args: key0, value0, key1, value1, ...
  Attr,     // args[0].name
  Item,     // args[0][args[1]]
  Slice,    // args[0][args[1]:args[2]:args[3]], each bound may be null
  Call,     // args[0](args[1..], kwargs)
  Filter,   // args[0] | name(args[1..], kwargs)
  Test,     // args[0] is [not] name(args[1..], kwargs)
  Unary,    // name ("-" or "+") args[0]
  Binary,   // args[0] name args[1]; name: + - * / // % ** ~ in "not in"
  Compare,  // args[0] ops[0] args[1] ops[1] args[2] ... (chained, as in Python)
  And,      // args[0] and args[1]
  Or,       // args[0] or args[1]
  Not,      // not args[0]
  Cond,     // args[0] if args[1] else args[2] (args[2] may be null: undefined)
};

struct Expr {
  ExprKind kind = ExprKind::Literal;
  int line = 0, col = 0;
  std::string name;
  Value value;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;  // Test: `is not`
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind : uint8_t {
  Text,    // text
  Output,  // {{ exprs[0] }}
  If,      // exprs[i] guards bodies[i]; one more body than exprs is the else
  For,     // for targets in exprs[0] [if exprs[1]]: bodies[0]; bodies[1] is the else (may be empty)
  Set,     // set targets = exprs[0], or set targets[0].attr = exprs[0]
  SetBlock,  // set targets[0] %} bodies[0] {% endset
  Macro,     // macro name(params, defaults in exprs, null when none) %} bodies[0]
  Break,
  Continue,
  Block,  // a wrapper whose body renders as is: {% generation %}
};

struct Stmt {
  StmtKind kind = StmtKind::Text;
  int line = 0, col = 0;
  std::string text;
  std::string name;  // Macro name
  std::string attr;  // Set on a namespace attribute
  std::vector<std::string> targets;
  std::vector<std::string> params;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
};

}  // namespace kamera::jinja
