// JSON Schema to grammar: every document the grammar accepts validates against the schema.
//
// The subset (what OpenAI's structured outputs accept, and what a float-parsing validator
// decides the same way):
//   type (a name or a list of them: object, array, string, number, integer, boolean, null),
//   properties, required, additionalProperties (false, true or absent: only the listed
//   properties are written, in the schema's order, required ones always, optional ones maybe),
//   enum, const, items (one schema), minItems, maxItems, anyOf, minimum, maximum,
//   exclusiveMinimum, exclusiveMaximum (numbers, or draft 4's booleans), minLength, maxLength,
//   $ref to "#/..." inside the schema (recursion allowed), and the annotations title,
//   description, default, examples, $schema, $id, $comment, $defs, definitions, deprecated,
//   readOnly, writeOnly.
// Any other keyword is refused by name (pattern, format, oneOf, allOf, not, prefixItems, ...),
// with the path where it appears.
//
// Without `type`, the type follows the keywords present (properties -> object, items -> array,
// minLength -> string, minimum -> number); with none of them, any JSON value.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/expr.h"
#include "grammar/grammar.h"
#include "grammar/json_rules.h"

namespace kamera::grammar {

// One document of `schema`, compiled into the rules of `rules` (for grammars that embed JSON,
// such as a tool call's arguments), charged to the rules' budget.
Result<Expr> json_schema_expr(JsonRules& rules, const nlohmann::ordered_json& schema);

// A finished grammar whose documents are the schema's (optional whitespace first). The compile
// is charged to `budget` (grammar/budget.h; null: a default budget).
Result<std::shared_ptr<const Grammar>> json_schema_grammar(const nlohmann::ordered_json& schema,
                                                           Budget* budget = nullptr);
// Any JSON object (response_format json_object).
Result<std::shared_ptr<const Grammar>> json_object_grammar(Budget* budget = nullptr);

}  // namespace kamera::grammar
