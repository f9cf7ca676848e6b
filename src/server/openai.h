// The OpenAI-compatible JSON of the server: request bodies to typed requests (completions, chat,
// chunk content) and results to response bodies. No I/O and no engine work: every function here
// is pure and runs on the HTTP side.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"
#include "model/model.h"
#include "reuse/store.h"
#include "server/generation.h"
#include "server/server.h"

namespace kamera {

using json = nlohmann::json;

// An HTTP-level failure: status code and message, answered as {"error": {...}}.
struct HttpError {
  int status = 0;
  std::string message;
  std::string type = "invalid_request_error";
};

// The HTTP status of a failed operation, from its error code.
int http_status(ErrorCode code);
HttpError http_error(const Error& e);
json error_body(const HttpError& e);

// JSON text of a response (invalid UTF-8 replaced, never thrown).
std::string dump(const json& j);

// The body as a JSON object.
Result<json> parse_body(std::string_view body);

// "prompt" of /v1/completions (a string or an array of parts), or "messages" of chat, with the
// sampling and reuse fields.
Result<GenRequest> gen_request(const json& body, bool chat, const ServerOptions& opts,
                               const ModelConfig& cfg);

// A chunk's content from {"text"}, {"tokens"} or {"embeddings", "positions"}.
Result<ChunkContent> chunk_content(const json& body, const Model& model, int max_chunk_tokens);
json chunk_json(const CanonicalEntry& e);

// Response bodies of a completion: whole, and the pieces of a stream.
struct CompletionMeta {
  std::string id, model;
  int64_t created = 0;
  bool chat = false;
};
json completion_body(const CompletionMeta& m, const std::string& text, const json& done_info);
json stream_piece(const CompletionMeta& m, const std::string& text, const json& finish_reason,
                  const json* usage);

}  // namespace kamera
