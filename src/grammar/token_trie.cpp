#include "grammar/token_trie.h"

#include <algorithm>

namespace kamera::grammar {

TokenTrie::TokenTrie(std::vector<std::string> token_bytes, std::vector<int32_t> eog)
    : bytes_(std::move(token_bytes)), eog_(std::move(eog)) {
  std::sort(eog_.begin(), eog_.end());
  eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
  rank_.assign(bytes_.size(), -1);
  for (size_t t = 0; t < bytes_.size(); ++t)
    if (!bytes_[t].empty() && !is_eog(int32_t(t))) order_.push_back(int32_t(t));
  std::sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
    const int c = bytes_[size_t(a)].compare(bytes_[size_t(b)]);
    return c != 0 ? c < 0 : a < b;
  });
  lcp_.assign(order_.size(), 0);
  flat_off_.assign(order_.size() + 1, 0);
  for (size_t i = 0; i < order_.size(); ++i) {
    const std::string& s = bytes_[size_t(order_[i])];
    flat_ += s;
    flat_off_[i + 1] = int32_t(flat_.size());
    rank_[size_t(order_[i])] = int32_t(i);
    max_len_ = std::max(max_len_, s.size());
    if (i == 0) continue;
    const std::string& p = bytes_[size_t(order_[i - 1])];
    size_t k = 0;
    while (k < s.size() && k < p.size() && s[k] == p[k]) ++k;
    lcp_[i] = int32_t(k);
  }
  // first_[b]: the first rank whose first byte is >= b (bytes compare as unsigned char).
  size_t i = 0;
  for (int b = 0; b <= 256; ++b) {
    while (i < order_.size() && uint8_t(bytes_[size_t(order_[i])][0]) < b) ++i;
    first_[b] = int32_t(i);
  }
}

std::shared_ptr<const TokenTrie> TokenTrie::from_tokenizer(const Tokenizer& tok) {
  std::vector<std::string> bytes(size_t(tok.n_vocab()));
  for (int32_t t = 0; t < tok.n_vocab(); ++t) bytes[size_t(t)] = tok.decode(-1, t);
  return std::make_shared<const TokenTrie>(std::move(bytes), tok.eog_ids());
}

bool TokenTrie::is_eog(int32_t token) const {
  return std::binary_search(eog_.begin(), eog_.end(), token);
}

}  // namespace kamera::grammar
