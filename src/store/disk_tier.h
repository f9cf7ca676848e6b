// The disk tier of the chunk store: one file per entry under a directory, crash-safe writes
// (temporary file, fsync, rename, fsync of the directory), a model fingerprint, a checksum and a
// MAC under the store key in every file (store/entry_codec.h). Survives restarts; corrupt, foreign
// or forged files are detected, deleted and counted, and the entry is recomputed by the caller,
// never served. Temporary files left by a crashed writer are swept at open; an optional byte cap
// evicts the least recently used files; the byte count is rebuilt from the directory at open.
#pragma once

#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "store/entry_codec.h"
#include "store/tier_load.h"

namespace kamera {

struct DiskTierOptions {
  // MAC key of the entries; empty: <dir>/store.key, made (32 random bytes, mode 0600) when absent.
  std::string key;
  size_t max_bytes = 0;  // 0: no cap
};

class DiskTier : public StoreTier {
 public:
  using Options = DiskTierOptions;
  // Creates <dir>/canonical and <dir>/patch as needed. `layout` is the model's KV layout: an entry
  // whose shapes do not fit it is discarded like a corrupt one.
  static Result<std::shared_ptr<DiskTier>> open(const std::string& dir, const Fingerprint& model,
                                                const KvLayout& layout, Options opts = {});

  std::string name() const override { return "disk"; }
  std::shared_ptr<const CanonicalEntry> load_canonical(const ChunkId& id) override;
  std::shared_ptr<const PatchEntry> load_patch(const PatchKey& key) override;
  void save_canonical(const CanonicalEntry& e) override;
  void save_patch(const PatchEntry& e) override;
  void erase_canonical(const ChunkId& id) override;
  std::shared_ptr<const ImageEntry> load_image(const ChunkId& key) override;
  void save_image(const ImageEntry& e) override;
  Stats stats() const override;

  std::string canonical_path(const ChunkId& id) const;
  std::string patch_path(const PatchKey& key) const;
  std::string image_path(const ChunkId& key) const;
  int64_t swept_temporaries() const { return swept_; }

 private:
  DiskTier(std::string dir, const Fingerprint& fp, KvLayout layout, Options o)
      : dir_(std::move(dir)), codec_(fp, std::move(layout), o.key), opts_(std::move(o)) {}
  void scan();  // at open: sweeps temporaries, indexes the entries, oldest last
  bool write_atomic(const std::string& path, const std::string& blob);
  void save_blob(const std::string& path, const std::string& blob);  // counts writes / errors
  // One entry through the shared load path (store/tier_load.h), under mu_.
  template <class Entry>
  std::shared_ptr<const Entry> load(const std::string& path,
                                    const typename Sealed<Entry>::Key& key);
  Fetched read_file(const std::string& path);
  void discard(const std::string& path);
  // The index of files (under mu_): recency and bytes, for the cap and the bytes metric.
  void index_put(const std::string& path, int64_t bytes);
  void index_drop(const std::string& path);
  void index_touch(const std::string& path);
  void evict_to_cap();

  std::string dir_;
  TierCodec codec_;
  Options opts_;
  mutable std::mutex mu_;
  Stats stats_;
  int64_t swept_ = 0;
  struct FileInfo {
    int64_t bytes;
    std::list<std::string>::iterator lru;
  };
  std::list<std::string> lru_;  // front = most recent
  std::unordered_map<std::string, FileInfo> files_;
};

// Reads the store key of a directory, making one when absent.
Result<std::string> directory_store_key(const std::string& dir);

}  // namespace kamera
