// A reranker: a causal LM whose relevance score is read from a classifier head over the last
// prompt token's final hidden state, as llama.cpp (d32676d) reads a GGUF file its converter wrote
// from Qwen3-Reranker (conversion/qwen.py, Qwen3Model):
//
//   {arch}.pooling_type = 4 (llama.cpp's LLAMA_POOLING_TYPE_RANK);
//   {arch}.classifier.output_labels = ["yes", "no"] (the head's rows; absent: one row);
//   cls.output.weight {n_embd, n_labels}: the rows of the LM head (the tied embedding or lm_head)
//     of the tokens "yes" and "no" (the converter drops an untied lm_head: the file then has no
//     output.weight);
//   tokenizer.chat_template.rerank (listed in tokenizer.chat_templates): the prompt, with {query}
//     and {document} where the two texts go: Qwen3-Reranker's system turn, its user turn of
//     <Instruct>/<Query>/<Document>, and the assistant turn opened with an empty think block.
//
// llama.cpp runs qwen3 and qwen3vl rerankers as: last token -> cls.output -> softmax; the score is
// the first output (p("yes") over {"yes", "no"}). kamera reads the same keys for those two
// architectures; another architecture's cls.output is refused at load (llama.cpp pools those by
// their first token, a BERT reading kamera does not run).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace kamera {

inline constexpr int kPoolingRank = 4;  // llama.cpp's LLAMA_POOLING_TYPE_RANK

// The Qwen3-Reranker prompt llama.cpp's converter writes when the file names none.
extern const char* const kQwen3RerankPrompt;

struct RerankHead {
  std::vector<float> rows;          // (n_out, dim), f32: the classifier's rows
  int n_out = 0;                    // outputs ("yes", "no")
  std::vector<std::string> labels;  // classifier.output_labels ("" for a missing label)
  std::string prompt;               // with {query} and {document}
};

// Why a file is or is not a reranker: the head when it is one, else the reason (for the 400 of
// /v1/rerank: "its pooling type is 0 (none), not 4 (rank)").
struct RerankInfo {
  std::optional<RerankHead> head;
  std::string why_not;
};

// The reranker reading of a model file (the loader accepts cls.output and leaves it to this; the
// server reads it once at start). Errors: an unreadable file, a cls.output whose row count is not
// the number of labels. A file that is no GGUF, or a head of fewer than two outputs (its softmax
// is constant), is no reranker.
Result<RerankInfo> read_rerank_file(const std::string& path);

// The score of one prompt from its last token's final hidden state (dim values): the head's
// first output after a softmax over its outputs (p("yes")), as llama.cpp's qwen3 rank pooling.
double rerank_score(const RerankHead& h, const float* hidden, int dim);

}  // namespace kamera
