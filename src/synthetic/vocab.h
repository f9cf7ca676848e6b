// The vocabulary of make-model's random-weight files (synthetic/synthetic_model.h).
#pragma once

#include <string_view>

#include "core/status.h"
#include "tokenizer/vocab.h"

namespace kamera {

// A deterministic SentencePiece-style vocabulary of exactly n_vocab pieces for synthetic models:
// <unk>, <s>, </s>, the 256 byte pieces, the characters of `corpus`, then BPE merges learned on
// `corpus` (scores descending), padded with unused placeholder pieces when the corpus runs out.
// n_vocab must be at least 259 + the number of distinct characters.
Result<Vocab> build_synthetic_vocab(int n_vocab, std::string_view corpus);

}  // namespace kamera
