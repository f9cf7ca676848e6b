// The tokenizer of a model: SentencePiece-style (llama.cpp's "llama" vocab, llama2.c's
// tokenizer.bin) or byte-level BPE (llama.cpp's "gpt2" vocab: Qwen, Llama-3, DeepSeek; see
// tokenizer_bpe.h), behind one interface.
//
// SentencePiece:
// Pieces are held in SentencePiece form: a space is U+2581 ("▁"); llama2.c files store ' ' and
// are converted on load. Byte-fallback pieces are "<0xXX>". Encoding: replace ' ' by "▁", prepend
// "▁" when add_space_prefix, split into UTF-8 characters, then repeatedly merge the adjacent pair
// whose concatenation is a vocabulary piece of the highest score (leftmost on ties); symbols left
// outside the vocabulary become their byte pieces.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/string_table.h"
#include "tokenizer/vocab.h"

namespace kamera {

class BpeModel;

class Tokenizer {
 public:
  using Vocab = ::kamera::Vocab;

  struct EncodeOptions {
    bool add_special = true;    // BOS / EOS as the vocabulary's add_bos / add_eos flags say
    bool parse_special = true;  // control tokens written in the text become their ids (BPE;
                                // user-defined tokens always do)
  };

  // Validates sizes and special ids; builds the piece index.
  static Result<Tokenizer> from_vocab(Vocab vocab);
  // llama2.c tokenizer.bin: i32 max_token_length, then vocab_size x (f32 score, i32 len, bytes).
  // Types are inferred (0 unknown, 1/2 control, "<0xXX>" byte, others normal).
  static Result<Tokenizer> from_llama2c_file(const std::string& path, int vocab_size);
  static Result<Tokenizer> from_llama2c_bytes(std::string_view bytes, int vocab_size,
                                              const std::string& name);

  int n_vocab() const { return int(vocab_.pieces.size()); }
  // BOS; for a BPE vocabulary without one (Qwen), its padding token, else its EOS.
  int32_t bos() const { return vocab_.bos; }
  int32_t eos() const { return vocab_.eos; }
  VocabKind kind() const { return vocab_.kind; }
  bool add_bos() const { return vocab_.add_bos; }
  bool add_eos() const { return vocab_.add_eos; }
  // The vocabulary it was built from, except a BPE vocabulary's merges: the BPE model keeps them
  // as a table of id pairs, and the list of "left right" texts is not kept.
  const Vocab& vocab() const { return vocab_; }
  // End of generation: EOS, EOT, EOM and the tokens llama.cpp stops on by their text
  // (<|im_end|>, <|eot_id|>, <|endoftext|>, <｜end▁of▁sentence｜>, ...).
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_; }

  // Text -> ids with explicit options (the `kamera tokenize` and server path). SentencePiece
  // reads special tokens as llama.cpp does (spm_special.cpp): user-defined ones always, control
  // ones with parse_special.
  std::vector<int32_t> tokenize(std::string_view text, const EncodeOptions& opts) const;
  // BPE: control tokens in the text are parsed; BOS when add_bos, never EOS.
  // `limit`: BPE stops cutting words once more than `limit` ids are made (the server passes the
  // context it has left: a prompt that cannot fit costs no more than the context to refuse).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, size_t limit = SIZE_MAX) const;
  // No BOS and no dummy space prefix: the text is taken as it is (a chunk in the middle of a
  // context carries its own leading space where it needs one).
  std::vector<int32_t> encode_raw(std::string_view text, size_t limit = SIZE_MAX) const;
  // Text -> ids where control tokens are read only inside `control` (sorted, disjoint byte ranges
  // of text, e.g. what a chat template wrote around the messages); everywhere else the spelling of
  // a control token is plain text, so text from a client cannot yield one. first: as encode()
  // (a prompt's first text part: SentencePiece's space prefix), else as encode_raw(); no BOS.
  // SentencePiece: as tokenize() (spm_special.cpp), control tokens read only inside the ranges.
  std::vector<int32_t> encode_marked(std::string_view text, std::span<const TextRange> control,
                                     bool first, size_t limit = SIZE_MAX) const;
  // Text of `token` following `prev`: "▁" becomes ' ', a leading space right after BOS is dropped
  // (as llama2.c prints), byte pieces become their byte, control tokens print nothing (but
  // harmony's message markers, see init_harmony in tokenizer.cpp). BPE: the
  // token's bytes (a multi-byte character may be split across tokens: see Utf8Stream).
  std::string decode(int32_t prev, int32_t token) const;
  std::string decode_all(const std::vector<int32_t>& tokens) const;
  // The token as a piece of text for display: like decode, but control tokens show their text.
  std::string piece(int32_t token) const;

 private:
  std::vector<int32_t> encode_with(std::string_view text, bool add_bos, bool space_prefix) const;
  std::vector<int32_t> encode_bpe(std::string_view text, bool bos, bool parse_special, bool eos,
                                  size_t limit = SIZE_MAX) const;
  // SentencePiece with special tokens (spm_special.cpp).
  void init_specials();
  int32_t special_at(std::string_view text, size_t at, std::span<const TextRange> control,
                     bool all_control) const;
  std::vector<int32_t> encode_spm_special(std::string_view text, std::span<const TextRange> control,
                                          bool all_control, bool prefix_first,
                                          size_t limit = SIZE_MAX) const;
  Status init_bpe();
  void init_eog();
  void init_harmony();

  Vocab vocab_;
  StringTable index_;                    // SPM: the pieces, indexed
  int32_t byte_token_[256] = {};         // SPM: id of "<0xXX>" or -1
  std::shared_ptr<const BpeModel> bpe_;  // BPE
  std::vector<int32_t> eog_;             // sorted
  std::vector<int32_t> specials_;        // SPM: control, user-defined, unknown; longest first
  std::bitset<256> special_first_;       // SPM: the first bytes of their pieces
  std::vector<int32_t> shown_;           // control tokens decode() prints (harmony's), sorted
};

}  // namespace kamera
