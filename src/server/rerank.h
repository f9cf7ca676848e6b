// POST /v1/rerank (also /rerank, /v1/reranking, /reranking), as llama-server --rerank serves it:
// a query and documents in, one relevance score per document out, best first, cut to top_n. The
// model must be a reranker (model/rerank.h: Qwen3-Reranker as llama.cpp converts it); the score
// of a document is p("yes") from the classifier head over the last token of the model's rerank
// prompt with the query and the document written in.
//
// Two request shapes, as llama.cpp's: Jina's ("documents": strings; answered as {"model",
// "object": "list", "usage", "results": [{"index", "relevance_score"}]}) and Hugging Face TEI's
// ("texts": answered as a bare array of {"index", "score"}). return_documents / return_text add
// the text ("document": {"text"} in Jina's shape, "text" in TEI's).
//
// The prompts share their beginning (the instruction and the query): it is forwarded once, and
// each document's rest continues from a copy-on-write fork of it, so N documents cost the shared
// prefix once plus their own tokens, never N prefills of the query. usage.prompt_tokens counts
// every prompt's tokens (as llama.cpp); prompt_tokens_details.cached_tokens the ones served
// without a forward (the prefix, for every document but the first).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "context/context.h"
#include "model/rerank.h"
#include "server/openai.h"

namespace kamera {

struct RerankRequest {
  std::vector<std::string> documents;
  std::vector<std::vector<int32_t>> prompts;  // each document's prompt, tokenized (no BOS)
  int top_n = 0;                              // results kept (all: the number of documents)
  bool tei = false;                           // "texts" (TEI's answer) rather than "documents"
  bool return_text = false;                   // return_documents / return_text
};

// The scores, in the documents' order, and the tokens the forwards computed.
struct RerankScores {
  std::vector<double> scores;
  int64_t forwarded = 0;  // tokens that went through a forward
  int64_t shared = 0;     // tokens of the shared prefix: forwarded once for every document
};

// The model file's reading as a reranker (model/rerank.h); a llama.cpp-less format is none.
Result<RerankInfo> rerank_info(const Model& model);
// The 400 of a model that is not a reranker, naming why; nullopt for a reranker.
std::optional<HttpError> refuse_not_reranker(const RerankInfo& info);

// The request, with each document's prompt rendered into the model's rerank template and
// tokenized (the template's text may hold control tokens; the query and documents are literal).
// nullopt with the refusal naming its field.
std::optional<RerankRequest> parse_rerank(const json& body, const Model& model,
                                          const RerankHead& head, size_t max_text_bytes,
                                          HttpError& refusal);

// The common token prefix of the prompts, forwarded once, then each prompt's rest from a fork of
// it (on the scheduler thread; the forwards are paced as every prefill). stop (may be empty):
// asked before each document; true ends the run (the client left).
Result<RerankScores> run_rerank(Context& ctx, const RerankHead& head, const RerankRequest& r,
                                const std::function<bool()>& stop = {});

json rerank_json(const RerankRequest& r, const RerankScores& s, const std::string& model_name);

}  // namespace kamera
