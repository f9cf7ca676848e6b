// The tokenizer keys of GGUF files, as llama.cpp's converter writes them and its loader reads
// them: tokenizer.ggml.{model, pre, tokens, scores, token_type, merges, *_token_id,
// add_bos_token, add_eos_token, add_space_prefix} and tokenizer.chat_template.
#pragma once

#include "core/status.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace kamera {

// The embedded vocabulary: "llama" (SentencePiece) or "gpt2" (byte-level BPE). Unsupported for
// other tokenizer models, CorruptData for malformed keys; messages name the file and the key.
Result<Tokenizer> tokenizer_from_gguf(const GgufFile& f);

// Writes `v`'s keys (special ids that are -1 are left out).
void write_tokenizer_gguf(GgufWriter& w, const Tokenizer::Vocab& v);

}  // namespace kamera
