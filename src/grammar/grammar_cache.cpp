#include "grammar/grammar_cache.h"

namespace kamera::grammar {

size_t GrammarCache::entry_bytes(const Entry& e) {
  // The key twice (the list and the index), and the grammar.
  return 2 * (sizeof(Entry) + e.first.capacity()) + e.second->memory_bytes();
}

void GrammarCache::evict() {
  size_t total = 0;
  for (const Entry& e : lru_) total += entry_bytes(e);
  while (!lru_.empty() && total > capacity_) {
    total -= entry_bytes(lru_.back());
    index_.erase(lru_.back().first);
    lru_.pop_back();
    ++evictions_;
  }
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::get(const std::string& key,
                                                                 const Build& build) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      auto found = lru_.front().second;
      evict();  // its masks, or another's, may have grown since
      return found;
    }
  }
  auto g = build();  // outside the lock: compiling a schema may take a while
  if (!g.ok()) return g.error();
  auto compiled = std::make_shared<const CompiledGrammar>(*g, trie_);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;  // raced
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  evict();
  return compiled;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

size_t GrammarCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t total = 0;
  for (const Entry& e : lru_) total += entry_bytes(e);
  return total;
}

}  // namespace kamera::grammar
