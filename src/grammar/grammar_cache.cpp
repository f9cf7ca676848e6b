#include "grammar/grammar_cache.h"

namespace kamera::grammar {

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::get(const std::string& key,
                                                                 const Build& build) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return lru_.front().second;
    }
  }
  auto g = build();  // outside the lock: compiling a schema may take a while
  if (!g.ok()) return g.error();
  auto compiled = std::make_shared<const CompiledGrammar>(*g, trie_);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;  // raced
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace kamera::grammar
