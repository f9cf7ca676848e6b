// The pool pages the caches hold (the prefix index's entries, the segment index's occurrences),
// each counted once however many holders share it, and the one clock their least recently used
// order is read on. Each index counts its own pages in one; the prompt assembler gives both the
// same shared one too, so that the two kinds of cached KV are held under one budget of pool pages
// and evicted in one LRU order (PromptAssembler::shrink_cached).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/pool.h"

namespace kamera {

class CachedPages {
 public:
  void hold(std::span<const int32_t> pages) {
    for (int32_t p : pages) ++refs_[p];
  }
  void release(std::span<const int32_t> pages) {
    for (int32_t p : pages) {
      auto it = refs_.find(p);
      if (it != refs_.end() && --it->second == 0) refs_.erase(it);
    }
  }
  int64_t pages() const { return int64_t(refs_.size()); }
  uint64_t tick() { return ++clock_; }

 private:
  std::unordered_map<int32_t, int> refs_;  // pool page -> holders
  uint64_t clock_ = 0;
};

// The distinct pool pages of a sequence's tokens, ascending.
inline std::vector<int32_t> pages_of(const KvPool& pool, SeqId seq) {
  std::vector<int32_t> pages;
  for (int32_t slot : pool.slots(seq)) pages.push_back(slot / pool.page_tokens());
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  return pages;
}

}  // namespace kamera
