#include "synthetic/vocab.h"

#include <algorithm>
#include <map>
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

}  // namespace

Result<Vocab> build_synthetic_vocab(int n_vocab, std::string_view corpus) {
  // The corpus is read as encode() reads text: spaces escaped, a leading "▁" (SentencePiece's
  // dummy prefix) so that its first word is learned as "▁word" like every other.
  const std::string text = escape_spaces(corpus, !corpus.empty());

  // Distinct characters by decreasing frequency, ties by byte order.
  std::map<std::string, int64_t> char_count;
  for (std::string_view c : split_chars(text)) ++char_count[std::string(c)];
  std::vector<std::pair<std::string, int64_t>> chars(char_count.begin(), char_count.end());
  std::stable_sort(chars.begin(), chars.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });

  constexpr int kFixed = 3 + 256;
  if (n_vocab < kFixed + int(chars.size())) {
    return make_error(ErrorCode::InvalidArgument,
                      "synthetic vocab: n_vocab {} is below the {} fixed pieces plus {} corpus "
                      "characters",
                      n_vocab, kFixed, chars.size());
  }

  Vocab v;
  v.pieces.reserve(size_t(n_vocab));
  v.scores.reserve(size_t(n_vocab));
  v.types.reserve(size_t(n_vocab));
  std::unordered_set<std::string> seen;
  const auto add = [&](std::string piece, float score, TokenType type) {
    seen.insert(piece);
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, TokenType::Unknown);
  add("<s>", 0, TokenType::Control);
  add("</s>", 0, TokenType::Control);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, TokenType::Byte);
  int64_t rank = 0;  // creation order of characters and merges; score = -rank
  for (auto& [c, count] : chars) add(c, -float(rank++), TokenType::Normal);

  // Words: split before each "▁" (the "▁" starts the following word).
  std::vector<std::string> sym_text;  // symbol id -> text
  std::unordered_map<std::string, int> sym_id;
  const auto intern = [&](const std::string& t) {
    auto [it, inserted] = sym_id.emplace(t, int(sym_text.size()));
    if (inserted) sym_text.push_back(t);
    return it->second;
  };
  std::map<std::string, int64_t> word_count;
  {
    size_t start = 0;
    for (size_t i = 1; i <= text.size(); ++i) {
      if (i == text.size() || text.compare(i, kSpace.size(), kSpace) == 0) {
        if (i > start) ++word_count[text.substr(start, i - start)];
        start = i;
      }
    }
  }
  std::vector<WordEntry> words;
  words.reserve(word_count.size());
  for (const auto& [w, count] : word_count) {
    WordEntry e{{}, count};
    for (std::string_view c : split_chars(w)) e.syms.push_back(intern(std::string(c)));
    if (e.syms.size() > 1) words.push_back(std::move(e));
  }

  // BPE: merge the most frequent adjacent pair (ties: smallest merged string) until the vocab is
  // full or no pair occurs twice.
  const auto pair_key = [](int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); };
  while (int(v.pieces.size()) < n_vocab) {
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
      std::string merged = sym_text[size_t(key >> 32)] + sym_text[size_t(uint32_t(key))];
      if (count > best_count || merged < best_text) {
        best = key, best_count = count, best_text = std::move(merged);
      }
    }
    if (best_count < 2) break;
    const int a = int(best >> 32), b = int(uint32_t(best));
    const int merged_id = intern(best_text);
    for (WordEntry& w : words) {
      size_t o = 0;
      for (size_t i = 0; i < w.syms.size(); ++i) {
        if (i + 1 < w.syms.size() && w.syms[i] == a && w.syms[i + 1] == b) {
          w.syms[o++] = merged_id;
          ++i;
        } else {
          w.syms[o++] = w.syms[i];
        }
      }
      w.syms.resize(o);
    }
    // Two different pairs can spell the same string; the piece exists once.
    if (!seen.count(best_text)) add(best_text, -float(rank++), TokenType::Normal);
  }

  for (int k = 0; int(v.pieces.size()) < n_vocab; ++k) {
    add(fmt::format("<unused_{}>", k), -float(rank++), TokenType::Unused);
  }
  v.bos = 1;
  v.eos = 2;
  v.unk = 0;
  v.add_space_prefix = true;
  return v;
}

}  // namespace kamera
