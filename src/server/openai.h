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
#include "serve/generation.h"
#include "server/json_fields.h"
#include "server/prompt_parts.h"
#include "server/server_options.h"
#include "store/store.h"

namespace kamera {

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
Result<std::vector<GenRequest>> gen_requests(const ojson& body, bool chat,
                                             const ServerOptions& opts, const ModelConfig& cfg,
                                             const ChatTemplate* tmpl = nullptr,
                                             std::string* param = nullptr,
                                             const ChatTools* tools = nullptr,
                                             const WordVocab* words = nullptr,
                                             const RequestMedia* media = nullptr);
// The same for one prompt (a batch is refused).
Result<GenRequest> gen_request(const ojson& body, bool chat, const ServerOptions& opts,
                               const ModelConfig& cfg, const ChatTemplate* tmpl = nullptr,
                               std::string* param = nullptr);

// A finished generation's usage: OpenAI's fields (prompt_tokens, completion_tokens, total_tokens,
// prompt_tokens_details.cached_tokens), usage.kamera (the policy, tokens reused and recomputed,
// the segments and their sources) and, with images, usage.images.
json usage_json(const Usage& u, const RequestMedia* media);

// A chunk's content from {"text"}, {"tokens"} or {"embeddings", "positions"}. Text longer than
// max_text_bytes is refused before it is tokenized (0: no limit); it is literal (control tokens
// spelled in it are text) unless control_tokens (the server's --control-tokens-in-text).
Result<ChunkContent> chunk_content(const json& body, const Model& model, int max_chunk_tokens,
                                   size_t max_text_bytes = 0, bool control_tokens = false);
json chunk_json(const CanonicalEntry& e);

}  // namespace kamera
