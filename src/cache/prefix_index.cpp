#include "cache/prefix_index.h"

#include <algorithm>

#include "core/mix.h"

namespace kamera {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix64's finalizer over the running value: every token changes every bit of the name.
  return mix64_finalize(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)));
}

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  return size_t(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

}  // namespace

PrefixIndex::PrefixIndex(KvPool& pool, Params params, CachedPages* shared)
    : pool_(pool), params_(params), shared_(shared) {
  params_.block_tokens = std::max(1, params_.block_tokens);
  params_.token_budget = std::max<int64_t>(0, params_.token_budget);
}

PrefixIndex::~PrefixIndex() {
  for (auto& [id, e] : entries_) {
    if (shared_) shared_->release(e.pages);
    pool_.free_sequence(e.seq);
  }
}

std::vector<uint64_t> PrefixIndex::block_names(std::span<const int32_t> tokens) const {
  const size_t bt = size_t(params_.block_tokens);
  std::vector<uint64_t> names;
  names.reserve(tokens.size() / bt);
  uint64_t h = 0x6b616d657261ull;  // any fixed seed
  for (size_t b = 0; b + bt <= tokens.size(); b += bt) {
    for (size_t i = b; i < b + bt; ++i) h = mix(h, uint64_t(uint32_t(tokens[i])));
    names.push_back(h);
  }
  return names;
}

// The entries holding the deepest block name of `blocks` the query has, or every entry when the
// query shares no full block with any.
std::vector<PrefixIndex::EntryId> PrefixIndex::candidates(
    const Blocks& blocks, const std::vector<uint64_t>& names) const {
  size_t depth = 0;
  while (depth < names.size() && blocks.count(names[depth])) ++depth;
  if (depth > 0) return blocks.at(names[depth - 1]);
  std::vector<EntryId> all;
  all.reserve(entries_.size());
  for (const auto& [id, e] : entries_) all.push_back(id);
  return all;
}

// Of `ids`, the longest match (approximate: tails included; else the exact parts only; on a
// bounded pool: the longest that can be resumed); on a tie the more exact, then the most recently
// used.
PrefixIndex::Match PrefixIndex::best_of(std::span<const int32_t> tokens,
                                        std::span<const EntryId> ids, bool approximate) const {
  Match best;
  uint64_t best_use = 0;
  for (EntryId id : ids) {
    const Entry& e = entries_.at(id);
    const int common = int(common_prefix(tokens, e.tokens));  // verified from the first token
    const int exact = std::min(common, e.exact);
    const int n = approximate ? common : exact;
    const bool better = n > best.n_tokens ||
                        (n == best.n_tokens && n > 0 &&
                         (exact > best.exact || (exact == best.exact && e.last_use > best_use)));
    if (!better || !holds_window(e.seq, n)) continue;
    best = {id, n, exact};
    best_use = e.last_use;
  }
  return best.n_tokens > 0 ? best : Match{};
}

// The best match among the candidates of `blocks` (best_of); on a bounded pool, when none of them
// can be resumed there, among every entry (a shallower one may hold the window).
PrefixIndex::Match PrefixIndex::best_in(const Blocks& blocks, std::span<const int32_t> tokens,
                                        const std::vector<uint64_t>& names,
                                        bool approximate) const {
  const std::vector<EntryId> ids = candidates(blocks, names);
  const Match best = best_of(tokens, ids, approximate);
  if (best.entry >= 0 || !bounded() || ids.size() == entries_.size()) return best;
  std::vector<EntryId> all;
  all.reserve(entries_.size());
  for (const auto& [id, e] : entries_) all.push_back(id);
  return best_of(tokens, all, approximate);
}

PrefixIndex::Match PrefixIndex::best_match(std::span<const int32_t> tokens,
                                           bool approximate) const {
  const std::vector<uint64_t> names = block_names(tokens);
  const Match exact = best_in(by_exact_block_, tokens, names, false);
  if (!approximate) return exact;
  const Match any = best_in(by_block_, tokens, names, true);
  return any.n_tokens > exact.n_tokens ? any : exact;
}

PrefixIndex::Match PrefixIndex::lookup(std::span<const int32_t> tokens, bool approximate) {
  ++stats_.lookups;
  const Match best = best_match(tokens, approximate);
  if (best.entry < 0) return best;
  Entry& e = entries_.at(best.entry);
  e.proven = std::max(e.proven, best.n_tokens);
  ++stats_.hits;
  stats_.tokens_matched += best.n_tokens;
  return best;
}

void PrefixIndex::drop_covered(std::span<const int32_t> tokens, int exact, SeqId seq) {
  std::vector<EntryId> covered;
  for (const auto& [id, e] : entries_) {
    const int n = int(e.tokens.size());
    if (e.pins == 0 && size_t(n) <= tokens.size() && e.exact <= exact &&
        common_prefix(tokens, e.tokens) == size_t(n) &&
        (holds_window(seq, n) || !holds_window(e.seq, n)))
      covered.push_back(id);
  }
  for (EntryId id : covered) erase(id);
}

Result<PrefixIndex::EntryId> PrefixIndex::insert(SeqId seq, std::span<const int32_t> tokens,
                                                 int exact) {
  if (!pool_.has_sequence(seq))
    return make_error(ErrorCode::NotFound, "prefix index: unknown sequence {}", seq);
  if (pool_.n_tokens(seq) < int(tokens.size())) {
    return make_error(ErrorCode::InvalidArgument,
                      "prefix index: sequence {} holds {} tokens, not the {} given", seq,
                      pool_.n_tokens(seq), tokens.size());
  }
  const int64_t n = int64_t(tokens.size());
  if (n == 0 || n > params_.token_budget) return EntryId(-1);
  exact = exact < 0 ? int(n) : std::min(exact, int(n));
  const Match held = best_match(tokens, true);
  if (held.n_tokens == n && held.exact >= exact) {
    entries_.at(held.entry).last_use = tick();  // an entry already holds them, as exactly
    return EntryId(-1);
  }
  // What the entry it extends (or shares a head with) had served stays proven.
  const int proven = held.entry >= 0 ? std::min(held.n_tokens, entries_.at(held.entry).proven) : 0;
  auto fork = pool_.fork(seq);
  if (!fork.ok()) return fork.error();
  if (Status st = pool_.truncate(*fork, int(n)); !st.ok()) {
    pool_.free_sequence(*fork);
    return st.error();
  }
  if (bounded() && !keep_checkpoint(*fork, int(n))) {
    pool_.free_sequence(*fork);  // it no longer holds the window at its end
    return EntryId(-1);
  }
  drop_covered(tokens, exact, *fork);
  const EntryId id = next_id_++;
  Entry& e = entries_[id];
  e.tokens.assign(tokens.begin(), tokens.end());
  e.block_names = block_names(tokens);
  e.exact = exact;
  e.seq = *fork;
  e.last_use = tick();
  e.proven = proven;
  for (uint64_t name : e.block_names) by_block_[name].push_back(id);
  for (size_t b = 0; b < exact_blocks(e, params_.block_tokens); ++b)
    by_exact_block_[e.block_names[b]].push_back(id);
  hold_pages(e);
  if (bounded()) limit_checkpoints(id);
  if (contains(id)) shrink_to(params_.token_budget);  // the new entry's own tail may go
  return contains(id) ? id : EntryId(-1);
}

bool PrefixIndex::resumable(EntryId entry, int n_tokens) const {
  auto it = entries_.find(entry);
  if (it == entries_.end() || n_tokens < 0 || n_tokens > int(it->second.tokens.size()))
    return false;
  return holds_window(it->second.seq, n_tokens);
}

Result<SeqId> PrefixIndex::fork_prefix(EntryId entry, int n_tokens) {
  auto it = entries_.find(entry);
  if (it == entries_.end())
    return make_error(ErrorCode::NotFound, "prefix index: unknown entry {}", entry);
  if (n_tokens < 0 || n_tokens > int(it->second.tokens.size())) {
    return make_error(ErrorCode::InvalidArgument, "prefix index: entry {} holds {} tokens, not {}",
                      entry, it->second.tokens.size(), n_tokens);
  }
  auto fork = pool_.fork(it->second.seq);
  if (!fork.ok()) return fork.error();
  if (Status st = pool_.truncate(*fork, n_tokens); !st.ok()) {
    pool_.free_sequence(*fork);
    return st.error();
  }
  it->second.last_use = tick();
  return *fork;
}

Status PrefixIndex::pin(EntryId entry) {
  auto it = entries_.find(entry);
  if (it == entries_.end())
    return make_error(ErrorCode::NotFound, "prefix index: unknown entry {}", entry);
  ++it->second.pins;
  return {};
}

void PrefixIndex::unpin(EntryId entry) {
  auto it = entries_.find(entry);
  if (it != entries_.end() && it->second.pins > 0) --it->second.pins;
}

size_t PrefixIndex::exact_blocks(const Entry& e, int block_tokens) {
  return std::min(e.block_names.size(), size_t(e.exact / block_tokens));
}

// Takes the entry out of the block indexes past its first `blocks` (its first `exact_blocks` in the
// index of exact blocks).
void PrefixIndex::unname(EntryId id, size_t blocks, size_t exact_blocks_kept) {
  const Entry& e = entries_.at(id);
  auto drop = [&](Blocks& index, size_t from, size_t to) {
    for (size_t b = from; b < to; ++b) {
      auto it = index.find(e.block_names[b]);
      if (it == index.end()) continue;
      std::erase(it->second, id);
      if (it->second.empty()) index.erase(it);
    }
  };
  drop(by_block_, blocks, e.block_names.size());
  drop(by_exact_block_, exact_blocks_kept, exact_blocks(e, params_.block_tokens));
}

void PrefixIndex::erase(EntryId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  unname(id, 0, 0);
  release_pages(it->second);
  pool_.free_sequence(it->second.seq);
  entries_.erase(it);
}

std::span<const int32_t> PrefixIndex::tokens(EntryId entry) const {
  auto it = entries_.find(entry);
  if (it == entries_.end()) return {};
  return it->second.tokens;
}

int PrefixIndex::exact_tokens(EntryId entry) const {
  auto it = entries_.find(entry);
  return it == entries_.end() ? 0 : it->second.exact;
}

PrefixIndex::Stats PrefixIndex::stats() const {
  Stats s = stats_;
  s.entries = int64_t(entries_.size());
  for (const auto& [id, e] : entries_) s.tokens_approximate += int64_t(e.tokens.size()) - e.exact;
  s.tokens_held = tokens_held();
  return s;
}

}  // namespace kamera
