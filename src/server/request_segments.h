// The segments of a completion request's prompt as `kamera serve` cuts them: the same chat
// template, request parsing (server/openai.h), tool rendering and tokenization
// (server/prompt_tokens.h), so that a router scores servers by the very segment ids the servers
// hold (server/cluster_events.h). No engine work: the context it keeps (a small KV pool) only
// gives the anchor and the chunk ids.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "context/context.h"
#include "jinja/chat_template.h"
#include "server/openai.h"
#include "server/server_options.h"
#include "toolcall/request.h"

namespace kamera {

// The chat template a server renders messages with: --chat-template, else the GGUF's, else none.
Result<std::optional<ChatTemplate>> chat_template_for(const Model& model, const ServerOptions& o);

// The most prompt text (bytes) a server takes before tokenizing: a token covers at most the
// longest vocabulary piece ("▁" counts its 3 bytes; a byte-fallback token one byte, a UTF-8
// character at most 4), so longer text needs more tokens than the context.
size_t longest_piece_bytes(const Model& model);
size_t max_prompt_bytes(const Model& model);

// A chat request's response_format and tool fields as a decoding plan, or the refusal (by name);
// its grammars compiled under `budget` (null: a default budget).
// `body` is the request as parsed in its order (parse_body into ordered_json): a schema's
// properties are written in the order it lists them.
std::variant<toolcall::DecodePlan, HttpError> plan_chat_fields(
    const nlohmann::ordered_json& body, const std::optional<toolcall::Format>& tool_format,
    grammar::Budget* budget = nullptr);

class RequestSegmenter {
 public:
  static Result<std::unique_ptr<RequestSegmenter>> create(std::shared_ptr<const Model> model,
                                                          const ServerOptions& opts);
  struct Segment {
    ChunkId id;
    int tokens = 0;
  };
  // The segments of a /v1/completions (chat = false) or /v1/chat/completions body, in order (a
  // batch: every prompt's). Fails where the server would refuse the request. The body as parsed
  // in its order (parse_body into ordered_json), as the server parses it.
  Result<std::vector<Segment>> segments(const nlohmann::ordered_json& body, bool chat) const;
  // The same in two steps: the body's generations (templated, not tokenized: a caller checks
  // their size first), then their segments (tokenized).
  Result<std::vector<GenRequest>> requests(const nlohmann::ordered_json& body, bool chat) const;
  Result<std::vector<Segment>> segments_of(std::vector<GenRequest>& reqs) const;
  // Bytes of one token's KV rows (f32): what a segment of n tokens holds, n times this.
  size_t row_bytes() const { return row_bytes_; }

 private:
  RequestSegmenter() = default;
  std::shared_ptr<const Model> model_;
  ServerOptions opts_;
  std::optional<ChatTemplate> tmpl_;
  std::optional<toolcall::Format> tool_format_;
  std::unique_ptr<Context> ctx_;
  size_t row_bytes_ = 0;
};

}  // namespace kamera
