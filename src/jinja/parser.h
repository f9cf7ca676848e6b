// Jinja parser: tokens -> syntax tree (jinja_ast.h), by recursive descent with jinja2's operator
// precedence (lowest first): `x if c else y`, or, and, not, comparisons (== != < <= > >= in
// `not in`), + -, ~, * / // %, **, unary - +, then postfix (.attr [item] [a:b:c] (call)) and
// filters/tests (`| f(...)`, `is [not] t ...`).
//
// Statements: if/elif/else, for (targets, `if` filter, else, loop.*), set (name, tuple of names,
// namespace attribute, block form), macro, break/continue, generation. Other tags (include,
// extends, block, call, filter, with, ...) are Unsupported errors, as are unknown filter and test
// names: a template that uses them fails here, before anything renders.
#pragma once

#include <string_view>
#include <vector>

#include "core/status.h"
#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace kamera::jinja {

// Nesting beyond this (expressions or blocks) is an error, so hostile input cannot exhaust the
// stack.
inline constexpr int kMaxParseDepth = 200;

// Errors name "<name>:LINE:COL" and what was expected.
Result<Body> parse(const std::vector<Token>& tokens, std::string_view name);

}  // namespace kamera::jinja
