// Pre-tokenizers of byte-level BPE vocabularies (GGUF `tokenizer.ggml.pre`): how text is cut into
// words before BPE runs on each word, and whether it is NFC-normalized first.
//
// A pre-tokenizer is a sequence of regular expressions, each applied to every piece the previous
// one produced, with Hugging Face's "Isolated" behaviour: every match becomes a piece and so does
// every stretch of text between matches. The expressions are the models' own (the `pre_tokenizer`
// Split patterns of their tokenizer.json), run by PCRE2 in UTF + UCP mode, so \p{L}, \p{N}, \s and
// (?i:...) follow the Unicode tables of the library, as Hugging Face's Oniguruma does.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kamera {

struct PreTokenizerInfo {
  std::string name;                  // canonical name (e.g. "qwen2" for "deepseek-r1-qwen")
  std::vector<std::string> regexes;  // applied in order, each with Isolated behaviour
  bool nfc = false;                  // NFC-normalize text outside added tokens first (Qwen)
  bool ignore_merges = false;        // a word that is itself a vocabulary token stays whole
  bool add_bos = false;              // llama.cpp's default for add_bos when the file has no key
};

// The pre-tokenizer of a `tokenizer.ggml.pre` name, or Unsupported (naming the known ones).
Result<PreTokenizerInfo> pre_tokenizer_info(std::string_view name);
// Every name pre_tokenizer_info accepts.
std::vector<std::string> pre_tokenizer_names();

// Compiled expressions (JIT where PCRE2 has it). Immutable and thread-safe once built.
class PreTokenizer {
 public:
  static Result<std::shared_ptr<const PreTokenizer>> create(const PreTokenizerInfo& info);
  ~PreTokenizer();

  const PreTokenizerInfo& info() const { return info_; }
  // Cuts valid UTF-8 `text` into words; the views point into `text`. Appends to `out`.
  void split(std::string_view text, std::vector<std::string_view>& out) const;
  // The same words, one call each, in order, until fn returns false (then false). Memory does
  // not grow with the text: each piece goes through every expression before the next is cut.
  bool for_each_word(std::string_view text, const std::function<bool(std::string_view)>& fn) const;

 private:
  PreTokenizer() = default;
  PreTokenizerInfo info_;
  std::vector<void*> codes_;  // pcre2_code_8*
};

// NFC normalization of valid UTF-8 (ICU). ASCII text is returned as it is.
std::string nfc_normalize(std::string_view text);

}  // namespace kamera
