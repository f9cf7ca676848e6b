// Importing a Hugging Face tokenizer (tokenizer.json, and optionally tokenizer_config.json) into a
// GGUF vocabulary laid out as llama.cpp's converter writes it. A SentencePiece-style BPE with byte
// fallback (Gemma 3's) becomes a "llama" (SPM) vocabulary as the converter writes it from the
// model's tokenizer.model (hf_import.cpp, import_spm_bpe, says how its scores are made). A
// byte-level BPE becomes a "gpt2" vocabulary:
// tokens by id (ids no entry uses become "[PAD<id>]", unused), merges as "left right", token types
// (added tokens: control when Hugging Face marks them special, user-defined otherwise), the
// pre-tokenizer name, special ids, add_bos/add_eos and the chat template.
//
// One deliberate difference from llama.cpp's converter: an added token that Hugging Face does not
// mark special (Qwen's <|fim_prefix|>, <tool_call>, <think>) stays user-defined even when its text
// "looks special", so that encoding with special-token parsing off still gives Hugging Face's ids
// (Hugging Face always splits out non-special added tokens). The SentencePiece-style import follows
// the converter there (Gemma's <unused*> and <mask> are control, as in the files users have).
#pragma once

#include <string>

#include "core/status.h"
#include "tokenizer/vocab.h"

namespace kamera {

// `config_path` may be empty. `pre` names the pre-tokenizer (tokenizer.ggml.pre) to write; when
// empty it is recognized from tokenizer.json's normalizer and pre_tokenizer, and an unrecognized
// one is an Unsupported error that lists the names kamera knows.
Result<Vocab> import_hf_tokenizer(const std::string& tokenizer_json, const std::string& config_path,
                                  const std::string& pre = "");

// The same from JSON text already in memory (`name` is used in messages).
Result<Vocab> import_hf_tokenizer_text(const std::string& tokenizer_json_text,
                                       const std::string& config_text, const std::string& name,
                                       const std::string& pre = "");

}  // namespace kamera
