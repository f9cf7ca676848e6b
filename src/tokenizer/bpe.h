// Byte-level BPE (GGUF tokenizer.ggml.model = "gpt2"), as Hugging Face tokenizers and llama.cpp run
// it for Qwen2/2.5/3, Llama-3 and DeepSeek:
//
//   text ──(added tokens split out: user-defined always, control when parse_special)──▶ segments
//   segment ──NFC (Qwen)──▶ pre-tokenizer regexes ──▶ words
//   word ──bytes as GPT-2 characters──▶ one symbol a byte ──merges, lowest rank first──▶ ids
//
// Vocabulary pieces of normal tokens are in GPT-2's byte-to-character form (' ' is "Ġ"); added
// (control and user-defined) tokens are plain UTF-8 text.
#pragma once

#include <cstdint>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/string_table.h"
#include "tokenizer/vocab.h"

namespace kamera {

// GPT-2's reversible byte-to-character map: printable Latin-1 bytes (! .. ~, ¡ .. ¬, ® .. ÿ) stand
// for themselves, the other 68 bytes map to U+0100.. in byte order. Returns the UTF-8 character.
const std::string& gpt2_byte_char(uint8_t byte);
// The byte a GPT-2 character (code point) stands for, or -1.
int gpt2_char_byte(uint32_t cp);

class BpeModel {
 public:
  // Builds the merge table (rank = index in vocab.merges, "left right" pairs of pieces), the byte
  // symbols, the added-token matcher and the pre-tokenizer named vocab.pre.
  static Result<std::shared_ptr<const BpeModel>> create(const Vocab& vocab);

  // Appends the ids of `text` (any bytes: ill-formed UTF-8 is read as U+FFFD, as llama.cpp does).
  // Stops once `out` holds more than `limit` ids (a word's ids are appended whole), so a text too
  // long for a context costs no more than the context: the words are cut one at a time.
  void encode(std::string_view text, bool parse_special, std::vector<int32_t>& out,
              size_t limit = SIZE_MAX) const;
  // The same, with control tokens read only where they lie wholly inside one of `control` (sorted,
  // disjoint byte ranges of text); elsewhere a control token's spelling is plain text.
  // User-defined tokens are split out everywhere, as with parse_special off.
  void encode(std::string_view text, std::span<const TextRange> control, std::vector<int32_t>& out,
              size_t limit = SIZE_MAX) const;
  // Bytes a token stands for: normal tokens through the byte map, added tokens as written.
  std::string_view token_bytes(int32_t id) const { return bytes_.at(id); }
  const PreTokenizerInfo& pre() const { return pre_->info(); }
  int32_t find(std::string_view piece) const;  // id of a vocabulary piece, or -1

 private:
  struct Merge {
    uint64_t key = ~uint64_t(0);  // (left id << 32) | right id; ~0 = empty slot
    int32_t rank = 0, id = 0;
  };
  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> next;  // (byte, node), sorted
    int32_t token = -1;
    bool control = false;
  };
  class WordCache;

  Status build_merges(const std::vector<std::string>& merges);
  const Merge* find_merge(int32_t left, int32_t right) const;
  int32_t trie_child(int32_t node, uint8_t b) const;
  void add_to_trie(std::string_view piece, int32_t id, bool control);
  // Longest added token at text[pos..]: its id and length, or {-1, 0}. A control token counts
  // only when it ends at or before control_end (0: none; SIZE_MAX: any).
  std::pair<int32_t, size_t> match_added(std::string_view text, size_t pos,
                                         size_t control_end) const;
  void encode_segment(std::string_view seg, WordCache& cache, std::vector<int32_t>& out,
                      size_t limit) const;
  // scratch: reused symbol buffer (one allocation per call, not per word)
  void encode_word(std::string_view word, std::vector<int32_t>& scratch,
                   std::vector<int32_t>& out) const;
  void merge_small(std::vector<int32_t>& ids) const;
  void merge_large(std::vector<int32_t>& ids) const;

  std::shared_ptr<const PreTokenizer> pre_;
  StringTable pieces_;         // token id <-> piece as the vocabulary spells it (indexed)
  StringTable bytes_;          // token id -> bytes
  int32_t byte_id_[256] = {};  // id of each byte's one-character piece, or -1
  std::vector<Merge> merges_;  // open addressing, power-of-two size
  uint64_t merge_mask_ = 0;
  std::vector<TrieNode> trie_;  // added tokens; node 0 is the root
  bool first_byte_[256] = {};   // bytes an added token can start with
};

}  // namespace kamera
