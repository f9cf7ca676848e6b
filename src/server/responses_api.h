// OpenAI's Responses API (POST /v1/responses) as a translator: its request becomes the chat
// request every API shares (messages, tools, tool_choice, response_format, max_tokens, ...), so it
// takes the same path to the KV it reuses (server/prompt_tokens.h: prefix and segment reuse), and
// its answer is written from the typed events (serve/events.h) as a Response object or the
// Responses stream of events (response.created, response.output_item.added,
// response.output_text.delta, ..., response.completed). Fields the Responses API has and kamera
// does not do are refused by name (docs/SERVER.md has the table).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace kamera {

struct ResponsesRequest {
  nlohmann::ordered_json chat;  // the chat completions body
  nlohmann::ordered_json echo;  // the request's settings, as the Response object repeats them
};

// The chat body of a Responses request: `input` (a string, or items: messages with input_text,
// output_text and input_image parts, function_call, function_call_output and reasoning items)
// after `instructions` as the system message; function tools; tool_choice; text.format as
// response_format; max_output_tokens as max_tokens; reasoning.effort as reasoning_effort.
// previous_response_id and store are the route's (server/response_store.h): the body comes with
// the continued conversation already in its input, and they are only echoed. On failure `param`
// names the Responses field at fault.
Result<ResponsesRequest> responses_request(const nlohmann::ordered_json& body, std::string* param);

// The items of a request's `input` (a string is one user message); a continued conversation
// (previous_response_id) starts with the stored response's items, then these.
Result<nlohmann::ordered_json> responses_input_items(const nlohmann::ordered_json& body,
                                                     std::string* param);

// The Responses field a refusal of the chat body names ("messages" is "input", ...).
std::string responses_param(const std::string& chat_param);

}  // namespace kamera
