#include "store/store.h"

#include <xxhash.h>

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
  auto it = canon_.find(id);
  if (it != canon_.end()) {
    ++stats_.canonical_hits;
    touch(it->second.lru);
    return it->second.entry;
  }
  ++stats_.canonical_misses;
  if (tombstones_.count(id)) return nullptr;
  const auto tiers = tiers_;
  lock.unlock();  // tiers do I/O: never under the store's lock
  for (const auto& t : tiers)
    if (auto e = t->load_canonical(id)) {
      lock.lock();
      if (tombstones_.count(id)) return nullptr;  // deleted while it was read
      ++stats_.tier_canonical_hits;
      insert_canonical_locked(e);
      return e;
    }
  return nullptr;
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
      if (tombstones_.count(key.chunk)) return nullptr;
      ++stats_.tier_patch_hits;
      insert_patch_locked(e);
      return e;
    }
  return nullptr;
}

void ChunkStore::put_canonical(std::shared_ptr<const CanonicalEntry> e) {
  std::unique_lock<std::mutex> lock(mu_);
  if (tombstones_.count(e->id)) return;  // deleted while this entry was being formed
  insert_canonical_locked(e);
  const auto tiers = tiers_;
  lock.unlock();
  // a delete from here on is ordered by each tier's own tombstone
  for (const auto& t : tiers) t->save_canonical(*e);
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
  canon_[id] = CanonSlot{std::move(e), lru_.begin()};
  stats_.canonical_bytes += b;
  ++stats_.canonical_entries;
  evict_to_budget();
}

void ChunkStore::put_patch(std::shared_ptr<const PatchEntry> e) {
  std::unique_lock<std::mutex> lock(mu_);
  if (tombstones_.count(e->key.chunk)) return;
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

bool ChunkStore::erase_canonical(const ChunkId& id) {
  std::unique_lock<std::mutex> lock(mu_);
  tombstones_.insert(id);
  bool had = forget_locked(id);
  const auto tiers = tiers_;
  lock.unlock();
  for (const auto& t : tiers) had = had || t->load_canonical(id) != nullptr;
  for (const auto& t : tiers) t->erase_canonical(id);
  return had;
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

}  // namespace kamera
