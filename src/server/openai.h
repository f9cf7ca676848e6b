// The OpenAI-compatible JSON of the server: request bodies to typed requests (completions, chat,
// chunk content) and results to response bodies. No I/O and no engine work: every function here
// is pure and runs on the HTTP side.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "jinja/chat_template.h"
#include "model/model.h"
#include "server/generation.h"
#include "server/prompt_parts.h"
#include "server/server.h"
#include "store/store.h"

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

// What a request body may hold, enforced while it is parsed (before any value is copied): the
// nesting of arrays and objects, and the number of values (scalars, arrays, objects and keys).
struct JsonLimits {
  int max_depth = 64;
  int64_t max_values = int64_t(1) << 21;
};

// The body as a JSON object into `out`, or the refusal: 400 invalid_json (malformed, or not an
// object), json_too_deep or json_too_many_values (the limit named in the message).
std::optional<HttpError> parse_body(std::string_view body, const JsonLimits& limits, json& out);

// A boolean field: `dflt` when absent or null, else it must be true or false (a string such as
// "true" is refused by name, never read as either).
Result<bool> bool_field(const json& body, const char* key, bool dflt);
// A string field: `dflt` when absent or null, else it must be a string.
Result<std::string> string_field(const json& body, const char* key, const std::string& dflt);

// An integer in [lo, hi], checked as 64 bits before any narrowing: a float (1.5), a value past
// int64 (2^64 - 1) or a string is refused, never wrapped. `what` names it in the message.
Result<int64_t> int_value(const json& v, const std::string& what, int64_t lo, int64_t hi);
// The same for a field of an object; `dflt` when absent or null.
Result<int64_t> int_field(const json& body, const char* key, int64_t dflt, int64_t lo, int64_t hi);
// A number field in [lo, hi], or its default when absent or null.
Result<double> number_field(const json& body, const char* key, double dflt, double lo, double hi);

// "prompt" of /v1/completions, or "messages" of chat, with the generation and reuse fields
// (server/request_fields.h). A prompt is a string, an array of token ids, or an array of parts
// (strings and {"type": "text" | "chunk"} objects); an array of strings or of token arrays is a
// batch, one request each (OpenAI's), their choices numbered on. Chat messages are rendered by
// `tmpl` when given (chunk parts stay chunks at their place in the rendered text), else laid out
// as "role: content" lines (server/prompt_parts.h: which bytes may yield control tokens). With
// `words` (the mini-VL), messages and prompts are the word prompt instead (WordVocab; tools are
// refused before, as for any model without a tool-call template), and a request that names no
// max_tokens gets one token (the model answers one word) unless --default-max-tokens says
// otherwise. On failure `param` (when given) names the field at fault.
Result<std::vector<GenRequest>> gen_requests(const json& body, bool chat, const ServerOptions& opts,
                                             const ModelConfig& cfg,
                                             const ChatTemplate* tmpl = nullptr,
                                             std::string* param = nullptr,
                                             const ChatTools* tools = nullptr,
                                             const WordVocab* words = nullptr);
// The same for one prompt (a batch is refused).
Result<GenRequest> gen_request(const json& body, bool chat, const ServerOptions& opts,
                               const ModelConfig& cfg, const ChatTemplate* tmpl = nullptr,
                               std::string* param = nullptr);

// A chunk's content from {"text"}, {"tokens"} or {"embeddings", "positions"}. Text longer than
// max_text_bytes is refused before it is tokenized (0: no limit); it is literal (control tokens
// spelled in it are text) unless control_tokens (the server's --control-tokens-in-text).
// A finished generation's usage: OpenAI's fields (prompt_tokens, completion_tokens, total_tokens,
// prompt_tokens_details.cached_tokens), usage.kamera (the policy, tokens reused and recomputed,
// the segments and their sources) and, with images, usage.images.
json usage_json(const PromptUsage& u, int64_t completion_tokens, const RequestMedia* media);

Result<ChunkContent> chunk_content(const json& body, const Model& model, int max_chunk_tokens,
                                   size_t max_text_bytes = 0, bool control_tokens = false);
json chunk_json(const CanonicalEntry& e);

}  // namespace kamera
