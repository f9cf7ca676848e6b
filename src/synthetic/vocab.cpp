// build_synthetic_vocab (vocab.h) in steps: the corpus's characters by frequency, the fixed
// pieces and the characters, the corpus's words as symbol sequences, then BPE merges (the most
// frequent adjacent pair each time) until the vocabulary is full, then placeholders.
#include "synthetic/vocab.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "tokenizer/spm.h"

namespace kamera {

namespace {

using spm::escape_spaces;
using spm::kSpace;
using spm::split_chars;

struct WordEntry {
  std::vector<int> syms;  // ids into the symbol table
  int64_t count;
};

// Symbol id <-> text: the characters, then each merged pair's text.
struct Symbols {
  std::vector<std::string> text;  // symbol id -> text
  std::unordered_map<std::string, int> id;

  int intern(const std::string& t) {
    auto [it, inserted] = id.emplace(t, int(text.size()));
    if (inserted) text.push_back(t);
    return it->second;
  }
};

// The vocabulary as it grows: pieces with their scores and types, each piece once.
struct VocabBuilder {
  Vocab v;
  std::unordered_set<std::string> seen;
  int64_t rank = 0;  // creation order of characters and merges; score = -rank

  void add(std::string piece, float score, TokenType type) {
    seen.insert(piece);
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  }
  void add_ranked(std::string piece, TokenType type) {
    add(std::move(piece), -float(rank++), type);
  }
};

// Distinct characters by decreasing frequency, ties by byte order.
std::vector<std::pair<std::string, int64_t>> chars_by_frequency(const std::string& text) {
  std::map<std::string, int64_t> char_count;
  for (std::string_view c : split_chars(text)) ++char_count[std::string(c)];
  std::vector<std::pair<std::string, int64_t>> chars(char_count.begin(), char_count.end());
  std::stable_sort(chars.begin(), chars.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return chars;
}

// Words: split before each "▁" (the "▁" starts the following word); those of two or more
// characters as symbol sequences, with their counts (in the words' byte order).
std::vector<WordEntry> corpus_words(const std::string& text, Symbols& symbols) {
  std::map<std::string, int64_t> word_count;
  size_t start = 0;
  for (size_t i = 1; i <= text.size(); ++i) {
    if (i == text.size() || text.compare(i, kSpace.size(), kSpace) == 0) {
      if (i > start) ++word_count[text.substr(start, i - start)];
      start = i;
    }
  }
  std::vector<WordEntry> words;
  words.reserve(word_count.size());
  for (const auto& [w, count] : word_count) {
    WordEntry e{{}, count};
    for (std::string_view c : split_chars(w)) e.syms.push_back(symbols.intern(std::string(c)));
    if (e.syms.size() > 1) words.push_back(std::move(e));
  }
  return words;
}

struct BestPair {
  int a, b;
  std::string text;
};

// The most frequent adjacent pair (ties: smallest merged string), if one occurs twice.
std::optional<BestPair> most_frequent_pair(const std::vector<WordEntry>& words,
                                           const Symbols& symbols) {
  const auto pair_key = [](int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); };
  std::unordered_map<uint64_t, int64_t> pair_count;
  for (const WordEntry& w : words) {
    for (size_t i = 0; i + 1 < w.syms.size(); ++i) {
      pair_count[pair_key(w.syms[i], w.syms[i + 1])] += w.count;
    }
  }
  uint64_t best = 0;
  int64_t best_count = 0;
  std::string best_text;
  for (const auto& [key, count] : pair_count) {
    if (count < 2 || count < best_count) continue;
    std::string merged = symbols.text[size_t(key >> 32)] + symbols.text[size_t(uint32_t(key))];
    if (count > best_count || merged < best_text) {
      best = key, best_count = count, best_text = std::move(merged);
    }
  }
  if (best_count < 2) return std::nullopt;
  return BestPair{int(best >> 32), int(uint32_t(best)), std::move(best_text)};
}

// Replaces each occurrence of the pair (a, b) in every word by `merged`.
void merge_pair(std::vector<WordEntry>& words, int a, int b, int merged) {
  for (WordEntry& w : words) {
    size_t o = 0;
    for (size_t i = 0; i < w.syms.size(); ++i) {
      if (i + 1 < w.syms.size() && w.syms[i] == a && w.syms[i + 1] == b) {
        w.syms[o++] = merged;
        ++i;
      } else {
        w.syms[o++] = w.syms[i];
      }
    }
    w.syms.resize(o);
  }
}

// BPE: merge the most frequent adjacent pair until the vocab is full or no pair occurs twice.
void learn_merges(VocabBuilder& vb, int n_vocab, std::vector<WordEntry>& words, Symbols& symbols) {
  while (int(vb.v.pieces.size()) < n_vocab) {
    std::optional<BestPair> best = most_frequent_pair(words, symbols);
    if (!best) break;
    merge_pair(words, best->a, best->b, symbols.intern(best->text));
    // Two different pairs can spell the same string; the piece exists once.
    if (!vb.seen.count(best->text)) vb.add_ranked(best->text, TokenType::Normal);
  }
}

}  // namespace

Result<Vocab> build_synthetic_vocab(int n_vocab, std::string_view corpus) {
  // The corpus is read as encode() reads text: spaces escaped, a leading "▁" (SentencePiece's
  // dummy prefix) so that its first word is learned as "▁word" like every other.
  const std::string text = escape_spaces(corpus, !corpus.empty());
  const auto chars = chars_by_frequency(text);
  constexpr int kFixed = 3 + 256;
  if (n_vocab < kFixed + int(chars.size())) {
    return make_error(ErrorCode::InvalidArgument,
                      "synthetic vocab: n_vocab {} is below the {} fixed pieces plus {} corpus "
                      "characters",
                      n_vocab, kFixed, chars.size());
  }
  VocabBuilder vb;
  vb.v.pieces.reserve(size_t(n_vocab));
  vb.v.scores.reserve(size_t(n_vocab));
  vb.v.types.reserve(size_t(n_vocab));
  vb.add("<unk>", 0, TokenType::Unknown);
  vb.add("<s>", 0, TokenType::Control);
  vb.add("</s>", 0, TokenType::Control);
  for (int b = 0; b < 256; ++b) vb.add(fmt::format("<0x{:02X}>", b), 0, TokenType::Byte);
  for (const auto& [c, count] : chars) vb.add_ranked(c, TokenType::Normal);

  Symbols symbols;
  std::vector<WordEntry> words = corpus_words(text, symbols);
  learn_merges(vb, n_vocab, words, symbols);
  for (int k = 0; int(vb.v.pieces.size()) < n_vocab; ++k)
    vb.add_ranked(fmt::format("<unused_{}>", k), TokenType::Unused);
  Vocab& v = vb.v;
  v.bos = 1;
  v.eos = 2;
  v.unk = 0;
  v.add_space_prefix = true;
  return std::move(v);
}

}  // namespace kamera
