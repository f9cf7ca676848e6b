// SentencePiece-style tokenizer (llama.cpp's "llama" vocab, llama2.c's tokenizer.bin).
//
// Pieces are held in SentencePiece form: a space is U+2581 ("▁"); llama2.c files store ' ' and
// are converted on load. Byte-fallback pieces are "<0xXX>". Encoding: replace ' ' by "▁", prepend
// "▁" when add_space_prefix, split into UTF-8 characters, then repeatedly merge the adjacent pair
// whose concatenation is a vocabulary piece of the highest score (leftmost on ties); symbols left
// outside the vocabulary become their byte pieces.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

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

class Tokenizer {
 public:
  struct Vocab {
    std::vector<std::string> pieces;  // SentencePiece form ("▁" for space)
    std::vector<float> scores;
    std::vector<TokenType> types;
    int32_t bos = 1, eos = 2, unk = 0;
    bool add_space_prefix = true;
  };

  // Validates sizes and special ids; builds the piece index.
  static Result<Tokenizer> from_vocab(Vocab vocab);
  // llama2.c tokenizer.bin: i32 max_token_length, then vocab_size x (f32 score, i32 len, bytes).
  // Types are inferred (0 unknown, 1/2 control, "<0xXX>" byte, others normal).
  static Result<Tokenizer> from_llama2c_file(const std::string& path, int vocab_size);
  static Result<Tokenizer> from_llama2c_bytes(std::string_view bytes, int vocab_size,
                                              const std::string& name);

  int n_vocab() const { return int(vocab_.pieces.size()); }
  int32_t bos() const { return vocab_.bos; }
  int32_t eos() const { return vocab_.eos; }
  const Vocab& vocab() const { return vocab_; }

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;
  // No BOS and no dummy space prefix: the text is taken as it is (a chunk in the middle of a
  // context carries its own leading space where it needs one).
  std::vector<int32_t> encode_raw(std::string_view text) const;
  // Text of `token` following `prev`: "▁" becomes ' ', a leading space right after BOS is dropped
  // (as llama2.c prints), byte pieces become their byte, control tokens print nothing.
  std::string decode(int32_t prev, int32_t token) const;
  std::string decode_all(const std::vector<int32_t>& tokens) const;

 private:
  std::vector<int32_t> encode_with(std::string_view text, bool add_bos, bool space_prefix) const;

  Vocab vocab_;
  std::unordered_map<std::string, int32_t> index_;
  int32_t byte_token_[256] = {};  // id of "<0xXX>" or -1
};

// A deterministic SentencePiece-style vocabulary of exactly n_vocab pieces for synthetic models:
// <unk>, <s>, </s>, the 256 byte pieces, the characters of `corpus`, then BPE merges learned on
// `corpus` (scores descending), padded with unused placeholder pieces when the corpus runs out.
// n_vocab must be at least 259 + the number of distinct characters.
Result<Tokenizer::Vocab> build_synthetic_vocab(int n_vocab, std::string_view corpus);

}  // namespace kamera
