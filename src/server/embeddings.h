// /v1/embeddings: one vector per input, from the model's final hidden states (after the output
// norm), pooled over the input's tokens by their mean (default) or as the last token's, then
// L2-normalized. Inputs as OpenAI's: a string, an array of strings, token ids, or an array of
// token arrays; encoding_format "float" or "base64" (little-endian float32).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "context/context.h"
#include "server/openai.h"

namespace kamera {

struct EmbedRequest {
  std::vector<std::vector<int32_t>> inputs;  // token ids of each input
  bool base64 = false;
  bool last_token = false;  // "pooling": "last"; else "mean"
};

// The request, tokenized (each input with BOS when the vocabulary wants one); nullopt with the
// refusal (naming its field; an input longer than the context is context_length_exceeded).
std::optional<EmbedRequest> parse_embeddings(const json& body, const Model& model,
                                             size_t max_text_bytes, HttpError& refusal);

// Runs every input through the engine on a scratch sequence (on the scheduler thread, in one of
// its sliced tasks: each forward is paced between decode steps as a prefill is): one vector per
// input. stop (may be empty): asked before each input; true ends the run (the client left).
Result<std::vector<std::vector<float>>> run_embeddings(Context& ctx, const EmbedRequest& r,
                                                       const std::function<bool()>& stop = {});
// OpenAI's body of the vectors: {"object": "list", "data": [{"object": "embedding", "index",
// "embedding"}], "model", "usage"}.
json embeddings_json(const EmbedRequest& r, const std::vector<std::vector<float>>& vectors,
                     const std::string& model_name);

}  // namespace kamera
