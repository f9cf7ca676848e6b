// A vocabulary as the constraint sees it: each token's bytes (what it adds to the text), and the
// tokens sorted by those bytes with the length of the prefix each shares with the one before it.
// Sorted this way the vocabulary is its own trie in preorder: a walk that keeps one matcher
// state per byte of the current token starts each token from the state after the prefix it
// shares with the previous one, and a prefix that no state survives rules out the whole run of
// tokens after it that share that prefix (grammar/token_walk.h).
//
// Tokens with no bytes (control tokens, which print nothing, and unused ones) are outside the
// order: a grammar never allows them. The end-of-generation tokens are listed apart: they are
// allowed exactly when the grammar is complete.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kamera::grammar {

class TokenTrie {
 public:
  TokenTrie(std::vector<std::string> token_bytes, std::vector<int32_t> eog);
  // Each token's text as Tokenizer::decode prints it after no particular token (control,
  // unknown and unused tokens print nothing); end of generation as Tokenizer::eog_ids.
  static std::shared_ptr<const TokenTrie> from_tokenizer(const Tokenizer& tok);

  int32_t n_vocab() const { return int32_t(bytes_.size()); }
  const std::string& bytes(int32_t token) const { return bytes_[size_t(token)]; }
  const std::vector<int32_t>& eog() const { return eog_; }
  bool is_eog(int32_t token) const;

  // The tokens with bytes, sorted by them; lcp(i) is the length of the prefix order(i) shares
  // with order(i - 1) (0 for i = 0).
  int32_t n_ordered() const { return int32_t(order_.size()); }
  int32_t order(int32_t i) const { return order_[size_t(i)]; }
  int32_t lcp(int32_t i) const { return lcp_[size_t(i)]; }
  int32_t rank(int32_t token) const { return rank_[size_t(token)]; }  // -1: no bytes
  // The bytes of order(i), from one buffer laid out in order (walks read it front to back).
  std::string_view ordered_bytes(int32_t i) const {
    return std::string_view(flat_).substr(size_t(flat_off_[size_t(i)]),
                                          size_t(flat_off_[size_t(i) + 1] - flat_off_[size_t(i)]));
  }
  // Ranks [first, end) of the tokens whose first byte is b.
  int32_t first_of(uint8_t b) const { return first_[b]; }
  int32_t end_of(uint8_t b) const { return first_[size_t(b) + 1]; }
  size_t max_len() const { return max_len_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> eog_;  // sorted
  std::vector<int32_t> order_, lcp_, rank_;
  std::string flat_;               // the ordered tokens' bytes, end to end
  std::vector<int32_t> flat_off_;  // where order(i) starts in flat_
  int32_t first_[257] = {};
  size_t max_len_ = 0;
};

}  // namespace kamera::grammar
