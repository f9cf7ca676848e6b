// In-memory chunk store: canonical entries and patch entries as separate objects under one byte
// budget, evicted least-recently-used first. Entries are immutable and shared: a caller holding
// one keeps it alive after eviction, and what was already written into a pool never depends on
// the store again.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "reuse/chunk.h"
#include "reuse/chunk_kv.h"
#include "reuse/patch.h"

namespace kamera {

struct CanonicalEntry {
  ChunkId id;
  ChunkContent content;  // kept so the chunk can be re-prefilled or re-patched later
  ChunkKV kv;            // KV(chunk | anchor), position-free
  size_t bytes() const;
};

// A patch is keyed by the chunk, the ordered ids of the chunks before it, and how it was made.
struct PatchKey {
  ChunkId chunk;
  ChunkId antecedents;  // sequence_signature of the ordered antecedent ids
  int rank = 0;         // kFullRank for full
  std::string layers;   // LayerSet::describe()
  bool per_head = false;
  DType dtype = DType::F32;
  bool orbit = false;  // mean deficit over orderings of the antecedent set (ids sorted)
  bool operator==(const PatchKey&) const = default;
  static PatchKey make(const ChunkId& chunk, std::span<const ChunkId> antecedents,
                       const PatchOptions& opts);
};

struct PatchKeyHash {
  size_t operator()(const PatchKey& k) const;
};

struct PatchEntry {
  PatchKey key;
  Patch patch;
  // The context the patch was measured in (the ordered antecedent ids), when known: tiers that
  // can keep it beside the patch (load_contexts), so that a server meeting the segment behind
  // other antecedents picks the nearest context's patch. Not part of the sealed entry.
  std::vector<ChunkId> antecedents = {};
  size_t bytes() const { return patch.bytes() + sizeof(PatchEntry); }
};

// An image's placed embedding rows (vision/image_chunks.h) under its image key (a hash of the
// pixels, the preprocessing and both models' fingerprints): a restart, or another server on the
// same tiers, reads them back instead of running the vision tower again.
struct ImageEntry {
  ChunkId key;
  ChunkContent placed;
};

// What a tier did with a delete.
enum class TierErase {
  Absent,       // the tombstone is in place; the tier did not hold the canonical
  Erased,       // the tombstone is in place; the canonical (and its patches, images) are gone
  Unreachable,  // the tier could not be told (an outage, a full disk): nothing is certain there
};

// A slower tier behind the in-memory store (disk, Redis). Loads return nullptr on a miss, on an
// unreachable backend, and on a corrupt or foreign entry (which the tier discards and counts).
// Tiers are thread-safe, and the memory tier never holds its lock while calling one.
class StoreTier {
 public:
  struct Stats {
    int64_t hits = 0, misses = 0, writes = 0, errors = 0, discarded = 0;
    int64_t forged = 0;     // discarded for a missing or wrong MAC (counted in discarded too)
    int64_t evictions = 0;  // entries dropped by the tier's own cap
    int64_t bytes = 0;      // held by the tier (when it knows)
  };
  virtual ~StoreTier() = default;
  virtual std::string name() const = 0;
  virtual std::shared_ptr<const CanonicalEntry> load_canonical(const ChunkId& id) = 0;
  virtual std::shared_ptr<const PatchEntry> load_patch(const PatchKey& key) = 0;
  // Whether the tier holds the entry now, whole (a write that failed leaves nothing of it); a
  // write dropped because the chunk is tombstoned answers true (the delete wins).
  virtual bool save_canonical(const CanonicalEntry& e) = 0;
  virtual void save_patch(const PatchEntry& e) = 0;
  // Whether what the tier holds survives a restart of this process on its own (a disk): an
  // upload is acknowledged only once its entry is written to every such tier
  // (ChunkStore::make_durable). Such a tier tells whether it holds a canonical written whole,
  // and why its last write failed.
  virtual bool durable() const { return false; }
  virtual bool holds_canonical(const ChunkId&) const { return false; }
  virtual std::string last_write_error() const { return {}; }
  // A delete: a durable tombstone first (it survives restarts, and every server sharing the tier
  // honours it: writes of the chunk, its patches and images are dropped, loads miss, until
  // revive_canonical, an explicit upload), then the canonical, every patch of the chunk and the
  // image embeddings linked to it go.
  virtual TierErase erase_canonical(const ChunkId& id) = 0;
  virtual void revive_canonical(const ChunkId&) {}
  // Whether the tier holds a tombstone for the chunk (false when it cannot tell).
  virtual bool tombstoned(const ChunkId&) { return false; }
  // Image embeddings (tiers that do not keep them miss and drop the write).
  virtual std::shared_ptr<const ImageEntry> load_image(const ChunkId&) { return nullptr; }
  virtual void save_image(const ImageEntry&) {}
  // Records that chunk `chunk` was made from image `image`, so that deleting the chunk deletes
  // the image's embeddings too; on a tombstoned chunk, deletes them now.
  virtual void link_image(const ChunkId& /*chunk*/, const ChunkId& /*image*/) {}
  // Several entries at once (a request's segments): a tier over a network asks for all of them in
  // one round trip per node. Answers in the order asked, null for a miss.
  struct Batch {
    std::vector<ChunkId> canonicals;
    std::vector<PatchKey> patches;
  };
  struct BatchLoaded {
    std::vector<std::shared_ptr<const CanonicalEntry>> canonicals;
    std::vector<std::shared_ptr<const PatchEntry>> patches;
  };
  virtual BatchLoaded load_batch(const Batch& want);  // default: one load after the other
  // For each chunk asked, the contexts (ordered antecedent ids) of the patches stored with theirs
  // (PatchEntry::antecedents), in one round trip; empty lists where none, or for tiers that keep
  // no contexts (the default).
  using Contexts = std::vector<std::vector<ChunkId>>;
  virtual std::vector<Contexts> load_contexts(std::span<const ChunkId> chunks) {
    return std::vector<Contexts>(chunks.size());
  }
  // What a fetch from the tier costs, measured on its batches (zero: not measured, or local):
  // a round trip, and the time per KiB beyond it. The caller fetches when that beats recomputing.
  struct FetchCost {
    double rtt_us = 0, us_per_kib = 0;
    int64_t samples = 0;
    double us(size_t bytes) const { return rtt_us + us_per_kib * double(bytes) / 1024; }
  };
  virtual FetchCost fetch_cost() const { return {}; }
  virtual bool remote() const { return false; }  // a network tier (its fetch is worth weighing)
  virtual Stats stats() const = 0;
};

class ChunkStore {
 public:
  struct Stats {
    int64_t canonical_hits = 0, canonical_misses = 0;      // memory tier
    int64_t tier_canonical_hits = 0, tier_patch_hits = 0;  // found in a slower tier
    int64_t patch_hits = 0, patch_misses = 0;
    int64_t canonical_evictions = 0, patch_evictions = 0;
    size_t canonical_bytes = 0, patch_bytes = 0, byte_budget = 0, patch_byte_budget = 0;
    int64_t canonical_entries = 0, patch_entries = 0;
    // KV bytes served from stored entries instead of being recomputed by a forward.
    size_t bytes_saved = 0;
    int64_t image_hits = 0, image_tier_hits = 0, image_misses = 0;
    size_t bytes_held() const { return canonical_bytes + patch_bytes; }
  };

  explicit ChunkStore(size_t byte_budget) : budget_(byte_budget) {}

  // Tiers are asked in order on a memory miss (a hit is copied into memory); every new entry is
  // written through to all of them.
  void add_tier(std::shared_ptr<StoreTier> tier);
  const std::vector<std::shared_ptr<StoreTier>>& tiers() const { return tiers_; }

  // Lookups count a hit or a miss and refresh recency.
  std::shared_ptr<const CanonicalEntry> find_canonical(const ChunkId& id);
  std::shared_ptr<const PatchEntry> find_patch(const PatchKey& key);
  // Several at once: memory first, then each tier's load_batch for what is still missing (one
  // round trip per node of a network tier); hits are kept in memory. In the order asked.
  StoreTier::BatchLoaded find_batch(const StoreTier::Batch& want);
  // The contexts the tiers keep for each chunk's patches (StoreTier::load_contexts), from every
  // tier that keeps them, tombstoned chunks left out; memory keeps none.
  std::vector<StoreTier::Contexts> find_contexts(std::span<const ChunkId> chunks);
  bool contains_canonical(const ChunkId& id) const;  // no counting

  // Inserts (replacing an entry with the same key), then evicts LRU entries until within budget.
  // An entry larger than the whole budget is not kept (and not an error).
  void put_canonical(std::shared_ptr<const CanonicalEntry> e);
  // An upload's acknowledgement: the entry written whole to every durable tier (StoreTier::
  // durable). A tier that does not hold it (its write failed in put_canonical, or the entry was
  // formed before) is written again; when that fails too (a full disk, a file-size limit) the
  // entry is dropped from memory, nothing of it is left in that tier, and the error names the
  // tier and the cause.
  Status make_durable(const std::shared_ptr<const CanonicalEntry>& e);
  void put_patch(std::shared_ptr<const PatchEntry> e);
  // A durable delete: drops the canonical, its patches and the image embeddings linked to it
  // from every tier and leaves a tombstone in each, so that work already in flight cannot store
  // the chunk again (its puts are dropped, lookups miss) until revive_canonical. `found`: a tier
  // had it (or an earlier delete of it is still pending here); `pending`: the tiers that could not
  // be told (the delete is not done: repeat it).
  struct Erase {
    bool found = false;
    std::vector<std::string> pending;
  };
  Erase erase_canonical(const ChunkId& id);
  void revive_canonical(const ChunkId& id);
  bool tombstoned(const ChunkId& id) const;
  // A memory hit older than this asks the tiers whether another server deleted the chunk.
  static constexpr int kRecheckMs = 1000;
  // Drops every entry of the memory tier (counters and slower tiers are kept).
  void clear();

  // Image embeddings: memory (the most recent kMaxImages, outside the byte budget), then the
  // tiers; a put writes through to every tier. find_image counts image_hits / image_tier_hits.
  static constexpr size_t kMaxImages = 64;
  std::shared_ptr<const ImageEntry> find_image(const ChunkId& key);
  void put_image(std::shared_ptr<const ImageEntry> e);
  // Chunk `chunk` was made from image `image` (StoreTier::link_image).
  void link_image(const ChunkId& chunk, const ChunkId& image);

  void note_bytes_saved(size_t bytes);
  void set_budget(size_t bytes);
  // A separate cap on patch bytes (within the total budget); LRU patches go first past it.
  void set_patch_budget(size_t bytes);
  Stats stats() const;

 private:
  struct Slot {
    bool is_patch;
    ChunkId id;
    PatchKey key;
  };
  void touch(std::list<Slot>::iterator it);
  void evict_to_budget();

  mutable std::mutex mu_;
  size_t budget_;
  size_t patch_budget_ = SIZE_MAX;
  Stats stats_;
  std::list<Slot> lru_;  // front = most recent
  struct CanonSlot {
    std::shared_ptr<const CanonicalEntry> entry;
    std::list<Slot>::iterator lru;
    std::chrono::steady_clock::time_point checked;  // against the tiers' tombstones
  };
  struct PatchSlot {
    std::shared_ptr<const PatchEntry> entry;
    std::list<Slot>::iterator lru;
  };
  std::unordered_map<ChunkId, CanonSlot, ChunkIdHash> canon_;
  std::unordered_map<PatchKey, PatchSlot, PatchKeyHash> patches_;
  std::vector<std::shared_ptr<StoreTier>> tiers_;
  std::unordered_set<ChunkId, ChunkIdHash> tombstones_;
  std::unordered_set<ChunkId, ChunkIdHash> pending_erases_;  // deletes some tier has not taken
  std::list<std::shared_ptr<const ImageEntry>> images_;      // front = most recent
  std::list<std::pair<ChunkId, ChunkId>> image_links_;       // (chunk, image), newest first
  void insert_canonical_locked(std::shared_ptr<const CanonicalEntry> e);
  void insert_patch_locked(std::shared_ptr<const PatchEntry> e);
  // Drops the canonical, its patches and its linked images from memory; whether it was there.
  bool forget_locked(const ChunkId& id);
  void remember_image_locked(std::shared_ptr<const ImageEntry> e);
  // Whether the chunk is tombstoned here or in a tier; may unlock `lock`.
  bool deleted(std::unique_lock<std::mutex>& lock, const ChunkId& id);
  // A memory hit, rechecked against the tiers' tombstones when due (may unlock `lock`).
  std::shared_ptr<const CanonicalEntry> memory_hit(std::unique_lock<std::mutex>& lock,
                                                   const ChunkId& id);
};

}  // namespace kamera
