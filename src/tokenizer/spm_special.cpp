// SentencePiece text with special tokens written in it, read as llama.cpp reads it
// (llama_vocab::impl::tokenizer_st_partition, then its SPM branch): the text is cut at the
// spellings of the vocabulary's special pieces (user-defined ones everywhere; control and unknown
// ones where control tokens are read), the longest piece first where several match; each piece
// of text between is encoded on its own, with the space prefix (when the vocabulary adds one)
// at the start of the text and after each special token; with rstrip_special (Phi-3) the
// whitespace after a special token other than <unk>, <s> and <|endoftext|> is dropped. A control
// range that is exactly one token is a delimiter kamera placed beside a picture: the text after
// it takes no space prefix, as the delimiters' ids are made (vision/kimi_chunks.cpp).
#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace kamera {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

void Tokenizer::init_specials() {
  specials_.clear();
  for (size_t i = 0; i < vocab_.pieces.size(); ++i) {
    const TokenType t = vocab_.types[i];
    if (vocab_.pieces[i].empty()) continue;
    if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown)
      specials_.push_back(int32_t(i));
  }
  std::stable_sort(specials_.begin(), specials_.end(), [&](int32_t a, int32_t b) {
    return vocab_.pieces[size_t(a)].size() > vocab_.pieces[size_t(b)].size();
  });
  special_first_.reset();
  for (int32_t id : specials_) special_first_.set(uint8_t(vocab_.pieces[size_t(id)][0]));
}

// The special token written at `at` that may be read there, or -1: `control` ranges (sorted) say
// where control and unknown tokens are read (all_control: everywhere).
int32_t Tokenizer::special_at(std::string_view text, size_t at, std::span<const TextRange> control,
                              bool all_control) const {
  if (!special_first_.test(uint8_t(text[at]))) return -1;
  for (int32_t id : specials_) {
    const std::string& p = vocab_.pieces[size_t(id)];
    if (text.compare(at, p.size(), p) != 0) continue;
    if (vocab_.types[size_t(id)] == TokenType::UserDefined || all_control) return id;
    const bool inside = std::any_of(control.begin(), control.end(), [&](const TextRange& r) {
      return r.begin <= at && at + p.size() <= r.end;
    });
    if (inside) return id;
  }
  return -1;
}

std::vector<int32_t> Tokenizer::encode_spm_special(std::string_view text,
                                                   std::span<const TextRange> control,
                                                   bool all_control, bool prefix_first,
                                                   size_t limit) const {
  std::vector<int32_t> out;
  bool prefix = prefix_first;
  size_t from = 0;
  auto run = [&](size_t end) {
    if (end <= from || out.size() > limit) return;
    const auto ids = encode_with(text.substr(from, end - from), false, prefix);
    out.insert(out.end(), ids.begin(), ids.end());
    prefix = false;
  };
  for (size_t at = 0; at < text.size() && out.size() <= limit;) {
    const int32_t id = special_at(text, at, control, all_control);
    if (id < 0) {
      ++at;
      continue;
    }
    run(at);
    out.push_back(id);
    const size_t begin = at;
    at += vocab_.pieces[size_t(id)].size();
    const bool delimiter = std::any_of(control.begin(), control.end(), [&](const TextRange& r) {
      return r.begin == begin && r.end == at;  // a range that is exactly this token
    });
    const std::string& p = vocab_.pieces[size_t(id)];
    if (vocab_.rstrip_special && p != "<unk>" && p != "<s>" && p != "<|endoftext|>")
      while (at < text.size() && is_space(text[at])) ++at;
    from = at;
    prefix = vocab_.add_space_prefix && !delimiter;
  }
  run(text.size());
  return out;
}

}  // namespace kamera
