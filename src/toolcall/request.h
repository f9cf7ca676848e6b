// What a chat request's OpenAI fields ask of decoding, decided before anything runs:
// `response_format` (text, json_object, json_schema), `tools`, `tool_choice` (none, auto,
// required, a named function) and `parallel_tool_calls`, against the tool-call format of the
// model's chat template.
//
//   response_format json_object / json_schema   the whole output under the JSON grammar
//   tool_choice "required" or a named function  the whole output under the forced-call grammar
//                                               (one call, or one or more when parallel)
//   tool_choice "auto", some tool "strict"      free text, and the forced-call grammar from the
//                                               format's call marker on (TriggeredConstraint)
//   tool_choice "auto", no strict tool          free text; calls parsed from it
//   tool_choice "none"                          free text; the tools are not rendered
//
// A strict tool's parameters must compile (grammar/json_schema.h); another tool's that do not
// compile are left as "any object" inside a forced call. Every refusal names the field (the
// `param` of OpenAI's error body): an unknown type, a tool_choice naming no tool, a schema
// keyword kamera does not support, tools for a template that renders no tool calls,
// response_format together with tools.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/budget.h"
#include "grammar/grammar.h"
#include "toolcall/format.h"
#include "toolcall/parser.h"

namespace kamera::toolcall {

struct DecodePlan {
  std::shared_ptr<const grammar::Grammar> grammar;  // null: no constraint
  std::string trigger;                  // non-empty: the grammar starts once the output reaches it
  bool parse_calls = false;             // split the output into text and tool calls
  std::optional<Format> format;         // the template's tool-call format
  nlohmann::ordered_json render_tools;  // the `tools` the template renders (null: none)
  bool json_output = false;             // response_format asked for JSON
  // What defines the grammar (the fields it was compiled from, as JSON text): requests with the
  // same key share one compiled grammar and its masks (grammar/grammar_cache.h).
  std::string grammar_key;
};

struct PlanError {
  std::string param;  // the offending field, e.g. "tool_choice", "tools[1].function.parameters"
  Error error;
};

// `format`: detect_format() of the model's template. The body is kept in its order
// (nlohmann::ordered_json), so properties are written in the schema's order. Every grammar the
// request needs is compiled under the one `budget` (grammar/budget.h; null: a default budget):
// once it is spent the request is refused, naming the field whose compile ran out (ask the
// budget whether it was spent, cancelled, or the schema itself was refused).
std::variant<DecodePlan, PlanError> plan_decoding(const nlohmann::ordered_json& body,
                                                  std::optional<Format> format,
                                                  grammar::Budget* budget = nullptr);

// The messages as the template expects them: each assistant tool call's `arguments` an object
// where the template serializes it (hermes, llama3: a JSON string from a client is parsed), a
// string where it concatenates it (deepseek3).
nlohmann::ordered_json prepare_messages(const nlohmann::ordered_json& messages, Format format);

// OpenAI's message.tool_calls for parsed calls, and delta.tool_calls for a stream piece (json, as
// the chat completion they go into is built).
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls);
nlohmann::json delta_calls_json(const std::vector<CallDelta>& calls);

}  // namespace kamera::toolcall
