// Compiled grammars kept across requests: the same schema (or the same tools) on the same
// vocabulary reuses its CompiledGrammar, and with it every position mask earlier generations
// filled (grammar/mask_cache.h). Bounded by bytes, not entries: an entry counts its key and what
// its grammar holds now (the masks grow as generations fill them), and the least recently used
// go first until the rest fit (a grammar bigger than the whole budget serves its request and is
// not kept). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/status.h"
#include "grammar/mask_cache.h"

namespace kamera::grammar {

class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenTrie> trie, size_t capacity_bytes)
      : trie_(std::move(trie)), capacity_(capacity_bytes) {}

  using Build = std::function<Result<std::shared_ptr<const Grammar>>()>;
  // The compiled grammar under `key` (what defines it, e.g. the schema's text), built by `build`
  // the first time; a failed build is not kept.
  Result<std::shared_ptr<const CompiledGrammar>> get(const std::string& key, const Build& build);

  size_t size() const;
  size_t bytes() const;  // what the kept entries hold now
  size_t hits() const { return hits_; }
  size_t evictions() const { return evictions_; }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;
  static size_t entry_bytes(const Entry& e);
  void evict();  // under mu_

  std::shared_ptr<const TokenTrie> trie_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // newest first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  size_t hits_ = 0, evictions_ = 0;
};

}  // namespace kamera::grammar
