#include "store/store.h"

#include <xxhash.h>

#include <fmt/ranges.h>

#include <algorithm>

namespace kamera {

size_t CanonicalEntry::bytes() const {
  return kv.bytes() + content.tokens.size() * sizeof(int32_t) +
         content.embeddings.size() * sizeof(float) + content.layout.size() * sizeof(Pos) +
         sizeof(CanonicalEntry);
}

PatchKey PatchKey::make(const ChunkId& chunk, std::span<const ChunkId> antecedents,
                        const PatchOptions& opts) {
  PatchKey k;
  k.chunk = chunk;
  k.antecedents = sequence_signature(antecedents);
  k.rank = opts.rank;
  k.layers = opts.layers.describe();
  k.per_head = opts.per_head;
  k.dtype = opts.dtype;
  return k;
}

size_t PatchKeyHash::operator()(const PatchKey& k) const {
  const uint64_t parts[] = {k.chunk.hi,
                            k.chunk.lo,
                            k.antecedents.hi,
                            k.antecedents.lo,
                            uint64_t(int64_t(k.rank)),
                            uint64_t(k.per_head),
                            uint64_t(k.dtype),
                            uint64_t(k.orbit)};
  return size_t(XXH3_64bits(parts, sizeof(parts)) ^ XXH3_64bits(k.layers.data(), k.layers.size()));
}

void ChunkStore::touch(std::list<Slot>::iterator it) {
  lru_.splice(lru_.begin(), lru_, it);
}

void ChunkStore::add_tier(std::shared_ptr<StoreTier> tier) {
  std::lock_guard<std::mutex> lock(mu_);
  tiers_.push_back(std::move(tier));
}

std::shared_ptr<const CanonicalEntry> ChunkStore::find_canonical(const ChunkId& id) {
  std::unique_lock<std::mutex> lock(mu_);
  if (canon_.count(id)) return memory_hit(lock, id);
  ++stats_.canonical_misses;
  if (tombstones_.count(id)) return nullptr;
  const auto tiers = tiers_;
  lock.unlock();  // tiers do I/O: never under the store's lock
  for (const auto& t : tiers)
    if (auto e = t->load_canonical(id)) {
      lock.lock();
      if (deleted(lock, id)) return nullptr;  // while it was read, or in another (shared) tier
      ++stats_.tier_canonical_hits;
      insert_canonical_locked(e);
      return e;
    }
  return nullptr;
}

std::shared_ptr<const CanonicalEntry> ChunkStore::memory_hit(std::unique_lock<std::mutex>& lock,
                                                             const ChunkId& id) {
  auto it = canon_.find(id);
  const auto now = std::chrono::steady_clock::now();
  std::shared_ptr<const CanonicalEntry> e = it->second.entry;
  if (!tiers_.empty() && now - it->second.checked >= std::chrono::milliseconds(kRecheckMs)) {
    it->second.checked = now;  // one recheck at a time
    const auto tiers = tiers_;
    lock.unlock();
    bool deleted = false;  // by another server sharing a tier
    for (const auto& t : tiers) deleted = deleted || t->tombstoned(id);
    lock.lock();
    if (deleted) {
      forget_locked(id);
      ++stats_.canonical_misses;
      return nullptr;
    }
    it = canon_.find(id);
  }
  ++stats_.canonical_hits;
  if (it != canon_.end()) touch(it->second.lru);
  return e;
}

bool ChunkStore::contains_canonical(const ChunkId& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return canon_.count(id) != 0;
}

std::shared_ptr<const PatchEntry> ChunkStore::find_patch(const PatchKey& key) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = patches_.find(key);
  if (it != patches_.end()) {
    ++stats_.patch_hits;
    touch(it->second.lru);
    return it->second.entry;
  }
  ++stats_.patch_misses;
  if (tombstones_.count(key.chunk)) return nullptr;
  const auto tiers = tiers_;
  lock.unlock();
  for (const auto& t : tiers)
    if (auto e = t->load_patch(key)) {
      lock.lock();
      if (deleted(lock, key.chunk)) return nullptr;
      ++stats_.tier_patch_hits;
      insert_patch_locked(e);
      return e;
    }
  return nullptr;
}

StoreTier::BatchLoaded StoreTier::load_batch(const Batch& want) {
  BatchLoaded out;
  for (const ChunkId& id : want.canonicals) out.canonicals.push_back(load_canonical(id));
  for (const PatchKey& k : want.patches) out.patches.push_back(load_patch(k));
  return out;
}

StoreTier::BatchLoaded ChunkStore::find_batch(const StoreTier::Batch& want) {
  StoreTier::BatchLoaded out;
  out.canonicals.resize(want.canonicals.size());
  out.patches.resize(want.patches.size());
  std::vector<std::shared_ptr<StoreTier>> tiers;
  {
    std::unique_lock<std::mutex> lock(mu_);
    for (size_t i = 0; i < want.canonicals.size(); ++i)
      if (canon_.count(want.canonicals[i]))
        out.canonicals[i] = memory_hit(lock, want.canonicals[i]);
    for (size_t i = 0; i < want.patches.size(); ++i)
      if (auto it = patches_.find(want.patches[i]); it != patches_.end()) {
        ++stats_.patch_hits;
        touch(it->second.lru);
        out.patches[i] = it->second.entry;
      }
    tiers = tiers_;
  }
  for (size_t t = 0; t < tiers.size(); ++t) {
    StoreTier::Batch ask;  // what is still missing, and not deleted here
    std::vector<size_t> ci, pi;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < want.canonicals.size(); ++i)
        if (!out.canonicals[i] && !tombstones_.count(want.canonicals[i]))
          ask.canonicals.push_back(want.canonicals[i]), ci.push_back(i);
      for (size_t i = 0; i < want.patches.size(); ++i)
        if (!out.patches[i] && !tombstones_.count(want.patches[i].chunk))
          ask.patches.push_back(want.patches[i]), pi.push_back(i);
    }
    if (ask.canonicals.empty() && ask.patches.empty()) break;
    StoreTier::BatchLoaded got = tiers[t]->load_batch(ask);
    // a tombstone in another tier (a tier's own load already honours its own)
    auto gone = [&](const ChunkId& id) {
      for (size_t o = 0; o < tiers.size(); ++o)
        if (o != t && tiers[o]->tombstoned(id)) return true;
      return false;
    };
    for (size_t k = 0; k < ci.size(); ++k)
      if (got.canonicals[k] && !gone(got.canonicals[k]->id)) {
        std::lock_guard<std::mutex> lock(mu_);
        if (tombstones_.count(got.canonicals[k]->id)) continue;
        ++stats_.tier_canonical_hits;
        insert_canonical_locked(got.canonicals[k]);
        out.canonicals[ci[k]] = got.canonicals[k];
      }
    for (size_t k = 0; k < pi.size(); ++k)
      if (got.patches[k] && !gone(got.patches[k]->key.chunk)) {
        std::lock_guard<std::mutex> lock(mu_);
        if (tombstones_.count(got.patches[k]->key.chunk)) continue;
        ++stats_.tier_patch_hits;
        insert_patch_locked(got.patches[k]);
        out.patches[pi[k]] = got.patches[k];
      }
  }
  return out;
}

std::vector<StoreTier::Contexts> ChunkStore::find_contexts(std::span<const ChunkId> chunks) {
  std::vector<StoreTier::Contexts> out(chunks.size());
  std::vector<std::shared_ptr<StoreTier>> tiers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tiers = tiers_;
  }
  for (const auto& t : tiers) {
    std::vector<StoreTier::Contexts> got = t->load_contexts(chunks);
    for (size_t i = 0; i < chunks.size() && i < got.size(); ++i)
      for (auto& c : got[i])
        if (std::find(out[i].begin(), out[i].end(), c) == out[i].end())
          out[i].push_back(std::move(c));
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < chunks.size(); ++i)
    if (tombstones_.count(chunks[i])) out[i].clear();
  return out;
}

bool ChunkStore::deleted(std::unique_lock<std::mutex>& lock, const ChunkId& id) {
  if (tombstones_.count(id)) return true;
  const auto tiers = tiers_;
  lock.unlock();
  // a tombstone of an earlier run, or of another server sharing a tier (not copied here: an
  // upload on that server revives the chunk for this one too)
  bool gone = false;
  for (const auto& t : tiers) gone = gone || t->tombstoned(id);
  lock.lock();
  return gone || tombstones_.count(id);
}

void ChunkStore::put_canonical(std::shared_ptr<const CanonicalEntry> e) {
  std::unique_lock<std::mutex> lock(mu_);
  if (deleted(lock, e->id)) return;  // deleted while this entry was being formed
  insert_canonical_locked(e);
  const auto tiers = tiers_;
  lock.unlock();
  // a delete from here on is ordered by each tier's own tombstone
  for (const auto& t : tiers) t->save_canonical(*e);  // a failure: counted and logged there
}

Status ChunkStore::make_durable(const std::shared_ptr<const CanonicalEntry>& e) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto tiers = tiers_;
  lock.unlock();
  std::vector<std::string> failed;
  for (const auto& t : tiers)
    if (t->durable() && !t->holds_canonical(e->id) && !t->save_canonical(*e))
      failed.push_back(fmt::format("{} ({})", t->name(), t->last_write_error()));
  if (failed.empty()) return Status::Ok();
  lock.lock();
  forget_locked(e->id);  // not acknowledged: not served from memory either
  return make_error(ErrorCode::Io, "chunk {} could not be stored durably: the {} tier failed",
                    e->id.hex(), fmt::format("{}", fmt::join(failed, ", ")));
}

void ChunkStore::insert_canonical_locked(std::shared_ptr<const CanonicalEntry> e) {
  const size_t b = e->bytes();
  auto it = canon_.find(e->id);
  if (it != canon_.end()) {
    stats_.canonical_bytes -= it->second.entry->bytes();
    --stats_.canonical_entries;
    lru_.erase(it->second.lru);
    canon_.erase(it);
  }
  if (b > budget_) return;
  const ChunkId id = e->id;  // e is moved below
  lru_.push_front(Slot{false, id, {}});
  canon_[id] = CanonSlot{std::move(e), lru_.begin(), std::chrono::steady_clock::now()};
  stats_.canonical_bytes += b;
  ++stats_.canonical_entries;
  evict_to_budget();
}

void ChunkStore::put_patch(std::shared_ptr<const PatchEntry> e) {
  std::unique_lock<std::mutex> lock(mu_);
  if (deleted(lock, e->key.chunk)) return;
  insert_patch_locked(e);
  const auto tiers = tiers_;
  lock.unlock();
  for (const auto& t : tiers) t->save_patch(*e);
}

void ChunkStore::insert_patch_locked(std::shared_ptr<const PatchEntry> e) {
  const size_t b = e->bytes();
  auto it = patches_.find(e->key);
  if (it != patches_.end()) {
    stats_.patch_bytes -= it->second.entry->bytes();
    --stats_.patch_entries;
    lru_.erase(it->second.lru);
    patches_.erase(it);
  }
  if (b > budget_ || b > patch_budget_) return;
  lru_.push_front(Slot{true, {}, e->key});
  const PatchKey key = e->key;
  patches_[key] = PatchSlot{std::move(e), lru_.begin()};
  stats_.patch_bytes += b;
  ++stats_.patch_entries;
  evict_to_budget();
}

ChunkStore::Erase ChunkStore::erase_canonical(const ChunkId& id) {
  std::unique_lock<std::mutex> lock(mu_);
  Erase out;
  tombstones_.insert(id);
  out.found = forget_locked(id) || pending_erases_.count(id);
  const auto tiers = tiers_;
  lock.unlock();
  for (const auto& t : tiers) {
    const TierErase r = t->erase_canonical(id);
    out.found = out.found || r == TierErase::Erased;
    if (r == TierErase::Unreachable) out.pending.push_back(t->name());
  }
  lock.lock();
  if (out.pending.empty())
    pending_erases_.erase(id);
  else
    pending_erases_.insert(id);
  return out;
}

bool ChunkStore::forget_locked(const ChunkId& id) {
  for (auto it = patches_.begin(); it != patches_.end();) {
    if (it->second.entry->key.chunk == id) {
      stats_.patch_bytes -= it->second.entry->bytes();
      --stats_.patch_entries;
      lru_.erase(it->second.lru);
      it = patches_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = image_links_.begin(); it != image_links_.end();) {
    if (it->first == id) {
      images_.remove_if([&](const auto& x) { return x->key == it->second; });
      it = image_links_.erase(it);
    } else {
      ++it;
    }
  }
  auto it = canon_.find(id);
  if (it == canon_.end()) return false;
  stats_.canonical_bytes -= it->second.entry->bytes();
  --stats_.canonical_entries;
  lru_.erase(it->second.lru);
  canon_.erase(it);
  return true;
}

void ChunkStore::revive_canonical(const ChunkId& id) {
  std::unique_lock<std::mutex> lock(mu_);
  tombstones_.erase(id);
  pending_erases_.erase(id);  // the upload supersedes a delete that did not finish
  const auto tiers = tiers_;
  lock.unlock();
  // also when this store has no tombstone: another server sharing a tier may have left one
  for (const auto& t : tiers) t->revive_canonical(id);
}

bool ChunkStore::tombstoned(const ChunkId& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return tombstones_.count(id) != 0;
}

void ChunkStore::evict_to_budget() {
  // Past the patch cap: drop the least recently used patches first.
  for (auto it = lru_.end(); stats_.patch_bytes > patch_budget_ && it != lru_.begin();) {
    --it;
    if (!it->is_patch) continue;
    auto p = patches_.find(it->key);
    stats_.patch_bytes -= p->second.entry->bytes();
    --stats_.patch_entries;
    ++stats_.patch_evictions;
    patches_.erase(p);
    it = lru_.erase(it);
  }
  while (stats_.bytes_held() > budget_ && !lru_.empty()) {
    const Slot victim = lru_.back();
    lru_.pop_back();
    if (victim.is_patch) {
      auto it = patches_.find(victim.key);
      stats_.patch_bytes -= it->second.entry->bytes();
      --stats_.patch_entries;
      ++stats_.patch_evictions;
      patches_.erase(it);
    } else {
      auto it = canon_.find(victim.id);
      stats_.canonical_bytes -= it->second.entry->bytes();
      --stats_.canonical_entries;
      ++stats_.canonical_evictions;
      canon_.erase(it);
    }
  }
}

void ChunkStore::note_bytes_saved(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.bytes_saved += bytes;
}

void ChunkStore::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  canon_.clear();
  patches_.clear();
  lru_.clear();
  images_.clear();
  image_links_.clear();
  stats_.canonical_bytes = stats_.patch_bytes = 0;
  stats_.canonical_entries = stats_.patch_entries = 0;
}

void ChunkStore::set_budget(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  budget_ = bytes;
  evict_to_budget();
}

void ChunkStore::set_patch_budget(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  patch_budget_ = bytes;
  evict_to_budget();
}

ChunkStore::Stats ChunkStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.byte_budget = budget_;
  s.patch_byte_budget = patch_budget_;
  return s;
}

std::shared_ptr<const ImageEntry> ChunkStore::find_image(const ChunkId& key) {
  std::unique_lock<std::mutex> lock(mu_);
  for (auto it = images_.begin(); it != images_.end(); ++it)
    if ((*it)->key == key) {
      images_.splice(images_.begin(), images_, it);
      ++stats_.image_hits;
      return images_.front();
    }
  const auto tiers = tiers_;
  lock.unlock();
  for (const auto& t : tiers)
    if (auto e = t->load_image(key)) {
      lock.lock();
      ++stats_.image_tier_hits;
      remember_image_locked(e);
      return e;
    }
  lock.lock();
  ++stats_.image_misses;
  return nullptr;
}

void ChunkStore::remember_image_locked(std::shared_ptr<const ImageEntry> e) {
  images_.remove_if([&](const auto& x) { return x->key == e->key; });
  images_.push_front(std::move(e));
  if (images_.size() > kMaxImages) images_.pop_back();
}

void ChunkStore::put_image(std::shared_ptr<const ImageEntry> e) {
  std::unique_lock<std::mutex> lock(mu_);
  remember_image_locked(e);
  const auto tiers = tiers_;
  lock.unlock();
  for (const auto& t : tiers) t->save_image(*e);
}

void ChunkStore::link_image(const ChunkId& chunk, const ChunkId& image) {
  std::unique_lock<std::mutex> lock(mu_);
  image_links_.remove_if([&](const auto& l) { return l.first == chunk && l.second == image; });
  if (tombstones_.count(chunk)) {
    images_.remove_if([&](const auto& x) { return x->key == image; });  // formed after a delete
  } else {
    image_links_.emplace_front(chunk, image);
    if (image_links_.size() > 4 * kMaxImages) image_links_.pop_back();
  }
  const auto tiers = tiers_;
  lock.unlock();
  for (const auto& t : tiers) t->link_image(chunk, image);
}

}  // namespace kamera
