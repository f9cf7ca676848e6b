// The disk tier of the chunk store: one file per entry under a directory, crash-safe writes
// (temporary file, fsync, rename, fsync of the directory), a model fingerprint, a checksum and a
// MAC under the store key in every file (store/entry_codec.h). Survives restarts; corrupt, foreign
// or forged files are detected, deleted and counted, and the entry is recomputed by the caller,
// never served. Temporary files left by a crashed writer are swept at open; an optional byte cap
// evicts the least recently used files; the byte count is rebuilt from the directory at open.
//
// Nothing on disk is trusted: an entry is opened with O_NOFOLLOW | O_NONBLOCK and read only when
// fstat says it is a regular file within the entry size limit and without holes, and then with a
// bound; a directory, FIFO, device or symbolic link named like an entry, or an oversized or sparse
// file, is discarded and counted like a corrupt one, never fatal and never blocking. The tier's
// lock guards only its index: no file is opened, read, written or removed under it.
#pragma once

#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/entry_codec.h"
#include "store/tier_load.h"

namespace kamera {

struct DiskTierOptions {
  // MAC key of the entries; empty: <dir>/store.key, made (32 random bytes, mode 0600) when absent.
  std::string key;
  size_t max_bytes = 0;        // 0: no cap
  size_t max_entry_bytes = 0;  // a larger file is discarded unread (0: default_entry_size_limit)
};

class DiskTier : public StoreTier {
 public:
  using Options = DiskTierOptions;
  // Creates <dir>/canonical, <dir>/patch and <dir>/image as needed. `layout` is the model's KV
  // layout: an entry whose shapes do not fit it is discarded like a corrupt one.
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
  DiskTier(std::string dir, const Fingerprint& fp, const KvLayout& layout, Options o)
      : dir_(std::move(dir)), codec_(fp, layout, o.key, o.max_entry_bytes), opts_(std::move(o)) {}
  void scan();  // at open: sweeps temporaries, indexes the entries, oldest last
  // Sweeps a folder's dead temporaries; indexes its entry files into `found`.
  void scan_folder(const char* sub, std::vector<std::pair<int64_t, std::string>>* found);
  void save_blob(const std::string& path, const std::string& blob);  // counts writes / errors
  template <class Entry>
  std::shared_ptr<const Entry> load(const std::string& path,
                                    const typename Sealed<Entry>::Key& key);
  void discard(const std::string& path);
  void remove_files(const std::vector<std::string>& paths);  // and from the index
  // The index of files (under mu_): recency and bytes, for the cap and the bytes metric.
  void index_put(const std::string& path, int64_t bytes);
  void index_drop(const std::string& path);
  bool index_touch(const std::string& path);
  std::vector<std::string> evict_to_cap();  // the victims, dropped from the index

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

// Reads a file that nothing vouches for: opened with O_NOFOLLOW (unless `follow_links`) and
// O_NONBLOCK, read only when it is a regular file of at most `limit` bytes without holes. Missing:
// state Missing; anything else that is not such a file: Refused, with why.
Fetched read_untrusted(const std::string& path, size_t limit, bool follow_links = false);

}  // namespace kamera
