// A model's vocabulary as its file holds it: pieces, scores, token types, special ids, merges and
// the pre-tokenizer's name (llama.cpp's tokenizer.ggml.* keys), plus the chat template the file
// carries. Plain data: the tokenizers (tokenizer/tokenizer.h) are built from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kamera {

// Token types, with llama.cpp's numeric values (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

enum class VocabKind { Spm, Bpe };

// Bytes [begin, end) of a text: where the tokenizers read control tokens when asked to read them
// only in parts of it (Tokenizer::encode_marked).
struct TextRange {
  size_t begin = 0, end = 0;
};

struct Vocab {
  VocabKind kind = VocabKind::Spm;
  std::vector<std::string> pieces;  // SPM: "▁" for space; BPE: GPT-2 byte characters
  std::vector<float> scores;        // SPM merge scores; BPE: unused (a Tokenizer keeps none)
  std::vector<TokenType> types;
  int32_t bos = 1, eos = 2, unk = 0;  // BPE: -1 where the vocabulary has none
  bool add_space_prefix = true;       // SPM only
  // SPM: the whitespace after a special token is dropped (Phi-3's added tokens are rstrip;
  // llama.cpp tells them by the file's general.name, and so does the GGUF reader)
  bool rstrip_special = false;
  // Byte-level BPE
  std::vector<std::string> merges;  // "left right" pieces; rank = index
  std::string pre = "default";      // pre-tokenizer name (tokenizer.ggml.pre)
  // Both kinds
  bool add_bos = true, add_eos = false;  // what a prompt gets (tokenizer.ggml.add_*_token)
  int32_t eot = -1, eom = -1, pad = -1;  // end of turn / of message, padding; -1 = none
  std::string chat_template;             // tokenizer.chat_template, carried through files
};

}  // namespace kamera
