// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) as a translator: its
// request becomes the chat request every API shares (server/responses_api.h does the same for
// OpenAI's Responses), so it takes the same path to the KV it reuses, and its answer is written
// from the typed events (server/messages_sink.h) as a Message or Anthropic's stream of events.
// Fields kamera does not do are refused by name (docs/SERVER.md has the table).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace kamera {

// The chat body of a Messages request: `system` (a string or text blocks) as the system message;
// `messages` with text, image (base64 and url sources), tool_use, tool_result and thinking
// blocks; tools with input_schema; tool_choice auto / any / tool / none; max_tokens (required
// unless count_only: the body of /v1/messages/count_tokens); stop_sequences as stop; thinking
// enabled / disabled as the template's reasoning switch. On failure `param` names the Messages
// field at fault.
// places (optional) receives where each chat message came from in the client's body.
struct MessagePlaces;
Result<nlohmann::ordered_json> messages_request(const nlohmann::ordered_json& body, bool count_only,
                                                std::string* param,
                                                MessagePlaces* places = nullptr);

// Where the chat body's messages came from in the Messages body: a top `system` becomes chat
// message 0 and a user message's tool_result blocks become messages of their own, so the chat
// body's messages[k].content[c] is not the client's messages[k].content[c].
struct MessagePlaces {
  std::vector<std::string> message;            // chat messages[k] -> "system", "messages[i]", ...
  std::vector<std::vector<std::string>> part;  // chat messages[k].content[c] -> the block's path
  // The client's name of a chat body's param ("messages[1].content[0].image_url" ->
  // "messages[0].content[1].source"), then messages_param's renames.
  std::string rename(const std::string& chat_param) const;
};

// The Messages field a refusal of the chat body names ("stop" is "stop_sequences", ...).
std::string messages_param(const std::string& chat_param);

// An error body in Anthropic's shape, {"type": "error", "error": {"type", "message"}}, of the
// status and OpenAI-shaped body kamera answers elsewhere.
nlohmann::json anthropic_error(int status, const nlohmann::json& openai_body);
// The same of a serialized body (one that is not an OpenAI error body is kept).
std::string anthropic_error_body(int status, const std::string& body);

}  // namespace kamera
