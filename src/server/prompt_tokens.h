// A request's prompt tokenized where it was parsed (an HTTP worker), so that the engine thread,
// which decodes every client's tokens, only looks ids up: each text part gets its tokens (literal
// but for what the chat template wrote and the vision delimiters: server/prompt_parts.h), and a
// prompt of text only gets its tokens from the anchor on and its segments with their ids
// (cache/prompt_plan.h), which the scheduler serves from its caches.
#pragma once

#include "cache/chunk_cache.h"
#include "serve/generation.h"

namespace kamera {

struct TokenizeOptions {
  bool control_everywhere = false;  // ServerOptions::control_tokens_in_text
  bool segments = true;             // cut a text prompt into segments
};

// The tokens of text part i (the prompt's first part when i == 0 and it follows no window).
Result<std::vector<int32_t>> part_tokens(const Model& model, const GenRequest& r, size_t i,
                                         bool control_everywhere);

// Tokenizes every text part of r (PromptPart::tokens), then for a prompt of text and the
// request's images fills r.prompt_ids (and, with o.segments, r.segments). Fails (nothing to queue)
// on a part that tokenizes to nothing or a model without a tokenizer.
Status tokenize_prompt(const ChunkCache& cache, GenRequest& r, const TokenizeOptions& o);

}  // namespace kamera
