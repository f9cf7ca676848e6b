// make-model --reranker: a qwen3 file as llama.cpp's converter (d32676d, conversion/qwen.py)
// writes Qwen3-Reranker (the loader's side is model/rerank.h): {arch}.pooling_type 4 (rank),
// {arch}.classifier.output_labels ["yes", "no"], tokenizer.chat_template.rerank (Qwen3-Reranker's
// prompt, listed in tokenizer.chat_templates) and cls.output.weight, the rows of the LM head of
// the tokens "yes" and "no". An untied head is dropped from the file, as the converter drops
// lm_head (it is replaced by cls.output).
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "model/config.h"
#include "synthetic/synthetic_model.h"
#include "tokenizer/vocab.h"

namespace kamera {

// A synthetic vocabulary without the pieces "yes" and "no" gets them: the two pieces before its
// last `skip` ones (its control tokens) become them.
void add_rerank_labels(Vocab& v, size_t skip);

// Writes the reranker file of config c (qwen3) with vocabulary v, whose "yes" and "no" pieces
// name the head's rows; `fill` gives every tensor's values as for a plain decoder file.
Status write_reranker_gguf(const ModelConfig& c, const std::string& model_name, DType weight_type,
                           const Vocab& v, const TensorFill& fill, const std::string& path);

}  // namespace kamera
