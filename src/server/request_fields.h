// The fields of a completion request as OpenAI documents them (and llama.cpp's top_k, min_p,
// repeat_penalty, and kamera's reuse fields): which are known, which are refused by name, and the
// generation parameters they set. Pure: no I/O, no engine (docs/SERVER.md has the table).
#pragma once

#include <optional>
#include <string>

#include "serve/generation.h"
#include "server/json_fields.h"
#include "server/server_options.h"

namespace kamera {

enum class Endpoint { Chat, Completions, Window };

// A field that is not known, or known but not supported (yet), or a no-op given a value that
// would change the output: 400 naming it as the error's param. nullopt when every field is one
// kamera honours.
std::optional<HttpError> check_fields(const ojson& body, Endpoint e);

// The generation fields into r.gen and r.n: limits (max_tokens / max_completion_tokens), sampling
// (temperature, top_p, top_k, min_p, seed), penalties, logit_bias, stop, logprobs, n. On failure
// `param` names the field (a static string).
Status generation_fields(const ojson& body, Endpoint e, const ServerOptions& opts,
                         const ModelConfig& cfg, GenRequest& r, const char*& param);

// stream_options.include_usage (false when absent); check_fields has checked the shape.
bool include_usage(const ojson& body);

}  // namespace kamera
