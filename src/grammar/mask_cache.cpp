#include "grammar/mask_cache.h"

#include <algorithm>

#include "core/clock.h"
#include "grammar/token_walk.h"

namespace kamera::grammar {

void TokenSet::add_to(std::vector<uint64_t>& out) const {
  if (!bits.empty()) {
    for (size_t w = 0; w < bits.size(); ++w) out[w] |= bits[w];
    return;
  }
  for (int32_t t : list) out[size_t(t) >> 6] |= uint64_t(1) << (t & 63);
}

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> g,
                                 std::shared_ptr<const TokenTrie> trie)
    : grammar_(std::move(g)), trie_(std::move(trie)), walker_(*grammar_) {
  grammar_bytes_ = sizeof(*this) + grammar_->memory_bytes();
  bytes_ = grammar_bytes_ + walker_.memory_bytes();
}

const PositionMasks& CompiledGrammar::masks(int32_t pos) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = by_pos_[pos];
  if (slot) return *slot;
  const double t0 = now_ms();
  auto pm = std::make_unique<PositionMasks>();
  std::vector<int32_t> accepted;
  TokenWalk walk(walker_, *trie_);
  const std::vector<int32_t> start = walker_.inside(pos);
  walk.all(start, [&](int32_t rank, Fate f) {
    if (f == Fate::Accepted)
      accepted.push_back(trie_->order(rank));
    else
      pm->escaped.push_back(rank);
  });
  const size_t words = (size_t(trie_->n_vocab()) + 63) / 64;
  pm->accepted.size = accepted.size();
  if (accepted.size() * 32 > size_t(trie_->n_vocab())) {  // a bitset is smaller than the list
    pm->accepted.bits.assign(words, 0);
    for (int32_t t : accepted) pm->accepted.bits[size_t(t) >> 6] |= uint64_t(1) << (t & 63);
  } else {
    std::sort(accepted.begin(), accepted.end());
    pm->accepted.list = std::move(accepted);
  }
  stats_.positions++;
  const double took = (now_ms() - t0) / 1000;
  stats_.fill_seconds += took;
  stats_.fill_seconds_max = std::max(stats_.fill_seconds_max, took);
  stats_.steps += walk.steps();
  stats_.accepted += pm->accepted.size;
  stats_.escaped += pm->escaped.size();
  // The position's masks and its entry in by_pos_ (node, key, value, hash, bucket).
  mask_bytes_ += sizeof(PositionMasks) + pm->accepted.bits.capacity() * sizeof(uint64_t) +
                 pm->accepted.list.capacity() * sizeof(int32_t) +
                 pm->escaped.capacity() * sizeof(int32_t) + 6 * sizeof(void*);
  bytes_ = grammar_bytes_ + mask_bytes_ + walker_.memory_bytes();
  slot = std::move(pm);
  return *slot;
}

MaskCacheStats CompiledGrammar::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kamera::grammar
