// The OpenAI-compatible JSON of the server: request bodies to typed requests (completions, chat,
// chunk content) and results to response bodies. No I/O and no engine work: every function here
// is pure and runs on the HTTP side.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"
#include "jinja/chat_template.h"
#include "model/model.h"
#include "server/generation.h"
#include "server/server.h"
#include "store/store.h"
#include "toolcall/format.h"

namespace kamera {

using json = nlohmann::json;

// An HTTP-level failure: status code and message, answered as OpenAI does:
// {"error": {"message", "type", "param", "code"}}. `code` is stable, for programs
// ("invalid_value", "not_found", "quota_exceeded", "context_length_exceeded", ...); `param`
// names the request field at fault (null when none is).
struct HttpError {
  int status = 0;
  std::string message;
  std::string type = "invalid_request_error";
  std::string code = "invalid_value";
  std::string param = {};
};

// The HTTP status of a failed operation, from its error code.
int http_status(ErrorCode code);
HttpError http_error(const Error& e);
json error_body(const HttpError& e);

// JSON text of a response (invalid UTF-8 replaced, never thrown).
std::string dump(const json& j);

// The body as a JSON object.
Result<json> parse_body(std::string_view body);

// An integer in [lo, hi], checked as 64 bits before any narrowing: a float (1.5), a value past
// int64 (2^64 - 1) or a string is refused, never wrapped. `what` names it in the message.
Result<int64_t> int_value(const json& v, const std::string& what, int64_t lo, int64_t hi);
// The same for a field of an object; `dflt` when absent or null.
Result<int64_t> int_field(const json& body, const char* key, int64_t dflt, int64_t lo, int64_t hi);
// A number field in [lo, hi], or its default when absent or null.
Result<double> number_field(const json& body, const char* key, double dflt, double lo, double hi);

// What a chat template renders besides the messages: the request's tools (null: none; tool_choice
// "none" renders none), and the template's tool-call format, which shapes the tool calls of
// assistant messages sent back (toolcall::prepare_messages).
struct ChatTools {
  nlohmann::ordered_json tools;
  std::optional<toolcall::Format> format;
};

// "prompt" of /v1/completions, or "messages" of chat, with the generation and reuse fields
// (server/request_fields.h). A prompt is a string, an array of token ids, or an array of parts
// (strings and {"type": "text" | "chunk"} objects); an array of strings or of token arrays is a
// batch, one request each (OpenAI's), their choices numbered on. Chat messages are rendered by
// `tmpl` when given (chunk parts stay chunks at their place in the rendered text), else laid out
// as "role: content" lines. On failure `param` (when given) names the field at fault.
Result<std::vector<GenRequest>> gen_requests(const json& body, bool chat, const ServerOptions& opts,
                                             const ModelConfig& cfg,
                                             const ChatTemplate* tmpl = nullptr,
                                             std::string* param = nullptr,
                                             const ChatTools* tools = nullptr);
// The same for one prompt (a batch is refused).
Result<GenRequest> gen_request(const json& body, bool chat, const ServerOptions& opts,
                               const ModelConfig& cfg, const ChatTemplate* tmpl = nullptr,
                               std::string* param = nullptr);

// A chunk's content from {"text"}, {"tokens"} or {"embeddings", "positions"}. Text longer than
// max_text_bytes is refused before it is tokenized (0: no limit).
Result<ChunkContent> chunk_content(const json& body, const Model& model, int max_chunk_tokens,
                                   size_t max_text_bytes = 0);
json chunk_json(const CanonicalEntry& e);

}  // namespace kamera
