// Grammars that force tool calls (tool_choice "required", a named function, or a function with
// "strict": true): the format's call text around arguments that validate against the function's
// parameters schema (grammar/json_schema.h), laid out as the model's template writes calls, the
// arguments in the compact layout tojson writes (grammar/json_rules.h: no token spent on
// whitespace).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/budget.h"
#include "grammar/expr.h"
#include "grammar/grammar.h"
#include "toolcall/format.h"

namespace kamera::toolcall {

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON Schema; null: any object
};

struct ForcedCalls {
  std::vector<ToolSpec> tools;  // the call is to one of these
  bool parallel = true;         // one call or more (llama3's templates take one: always one)
};

// The whole output: one call or more, nothing else; the compile charged to `budget` (null: a
// default budget).
Result<std::shared_ptr<const grammar::Grammar>> forced_calls_grammar(
    Format f, const ForcedCalls& c, grammar::Budget* budget = nullptr);
// Harmony (gpt-oss): every constrained output may begin with one analysis message (the model's
// reasoning, any text without "<|"), then the forced message. The optional analysis message:
grammar::Expr harmony_analysis();
// response_format's JSON document in harmony's framing: the optional analysis message, then
// <|channel|>final<|message|> and the document (`schema` null: any object).
Result<std::shared_ptr<const grammar::Grammar>> harmony_json_grammar(
    const nlohmann::ordered_json* schema, grammar::Budget* budget = nullptr);
// The text a harmony call starts with, whatever its function.
inline constexpr std::string_view kHarmonyCallTrigger = "<|channel|>commentary to=functions.";
// The text every call sequence of the format begins with: a lazily started constraint
// (grammar/triggered.h) takes over once the model has written it.
std::string_view call_trigger(Format f);

}  // namespace kamera::toolcall
