#include "tokenizer/string_table.h"

#include <functional>

#include "core/status.h"

namespace kamera {

void StringTable::add(std::string_view s) {
  KAMERA_ASSERT(chars_.size() + s.size() <= UINT32_MAX);
  chars_.append(s);
  ends_.push_back(uint32_t(chars_.size()));
}

void StringTable::build_index() {
  size_t cap = 16;
  while (cap * 3 < size() * 5) cap <<= 1;  // at most 60% full: short probes
  slots_.assign(cap, -1);
  const size_t mask = cap - 1;
  for (size_t id = 0; id < size(); ++id) {
    const std::string_view s = at(int32_t(id));
    size_t h = std::hash<std::string_view>{}(s)&mask;
    while (slots_[h] >= 0 && at(slots_[h]) != s) h = (h + 1) & mask;
    if (slots_[h] < 0) slots_[h] = int32_t(id);
  }
}

int32_t StringTable::find(std::string_view s) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  for (size_t h = std::hash<std::string_view>{}(s)&mask;; h = (h + 1) & mask) {
    const int32_t id = slots_[h];
    if (id < 0 || at(id) == s) return id;
  }
}

}  // namespace kamera
