// The disk tier of the chunk store: one file per entry under a directory, crash-safe writes
// (temporary file, fsync, rename, fsync of the directory; a write that fails at any step, a full
// disk or a file-size limit, leaves no file and is reported), a model fingerprint, a checksum and a
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
//
// Layout of the directory:
//   canonical/<chunk>.kce   patch/<chunk>.<patch key>.kpe   image/<image key>.kie
//   tombstone/<chunk>       link/<chunk>.<image key>  (the chunk was made from that image)
// A delete writes the tombstone (durably) before it removes the chunk's canonical, patches and
// linked images; a write of a tombstoned chunk is dropped, checked again after its rename, so a
// delete and a write racing (in this process or another one on the same directory) never leave
// the entry behind. Tombstones older than `tombstone_ttl_s` go at open.
#pragma once

#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "store/entry_codec.h"
#include "store/tier_load.h"

namespace kamera {

struct DiskTierOptions {
  // MAC key of the entries; empty: <dir>/store.key, made (32 random bytes, mode 0600) when absent.
  std::string key;
  size_t max_bytes = 0;        // 0: no cap
  size_t max_entry_bytes = 0;  // a larger file is discarded unread (0: default_entry_size_limit)
  int tombstone_ttl_s = 7 * 24 * 3600;
};

class DiskTier : public StoreTier {
 public:
  using Options = DiskTierOptions;
  // Creates <dir>/canonical, patch, image, tombstone and link as needed. `layout` is the model's
  // KV layout: an entry whose shapes do not fit it is discarded like a corrupt one.
  static Result<std::shared_ptr<DiskTier>> open(const std::string& dir, const Fingerprint& model,
                                                const KvLayout& layout, Options opts = {});

  std::string name() const override { return "disk"; }
  std::shared_ptr<const CanonicalEntry> load_canonical(const ChunkId& id) override;
  std::shared_ptr<const PatchEntry> load_patch(const PatchKey& key) override;
  bool save_canonical(const CanonicalEntry& e) override;
  bool durable() const override { return true; }
  bool holds_canonical(const ChunkId& id) const override;
  std::string last_write_error() const override;
  void save_patch(const PatchEntry& e) override;
  TierErase erase_canonical(const ChunkId& id) override;
  void revive_canonical(const ChunkId& id) override;
  bool tombstoned(const ChunkId& id) override;
  std::shared_ptr<const ImageEntry> load_image(const ChunkId& key) override;
  void save_image(const ImageEntry& e) override;
  void link_image(const ChunkId& chunk, const ChunkId& image) override;
  Stats stats() const override;

  std::string canonical_path(const ChunkId& id) const;
  std::string patch_path(const PatchKey& key) const;
  std::string image_path(const ChunkId& key) const;
  std::string tombstone_path(const ChunkId& id) const;
  int64_t swept_temporaries() const { return swept_; }

 private:
  DiskTier(std::string dir, const Fingerprint& fp, const KvLayout& layout, Options o)
      : dir_(std::move(dir)), codec_(fp, layout, o.key, o.max_entry_bytes), opts_(std::move(o)) {}
  void scan();  // at open: sweeps temporaries, indexes the entries, oldest last
  // Sweeps a folder's dead temporaries; indexes its entry files into `found` (when given).
  void scan_folder(const char* sub, std::vector<std::pair<int64_t, std::string>>* found);
  void expire_tombstones();
  std::string migrate_patch(const std::string& path);  // a patch file of the older naming
  // Writes `blob` at `path` unless `chunk` (when given) is tombstoned; counts writes / errors.
  // Whether the file is there, whole and durable (or the write was dropped for a tombstone).
  bool save_blob(const std::string& path, const std::string& blob, const ChunkId* chunk);
  template <class Entry>
  std::shared_ptr<const Entry> load(const std::string& path, const typename Sealed<Entry>::Key& key,
                                    const ChunkId* chunk);
  void discard(const std::string& path);
  void remove_files(const std::vector<std::string>& paths);  // and from the index
  // The files of `sub` whose names start with "<chunk>." (patches, links of a chunk).
  std::vector<std::string> files_of(const char* sub, const ChunkId& chunk, bool* ok) const;
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
  std::string last_error_;  // why the last failed write failed
  struct FileInfo {
    int64_t bytes;
    std::list<std::string>::iterator lru;
  };
  std::list<std::string> lru_;  // front = most recent
  std::unordered_map<std::string, FileInfo> files_;
  std::unordered_set<ChunkId, ChunkIdHash> tombs_;  // written by this process (also on disk)
};

// Reads the store key of a directory, making one when absent.
Result<std::string> directory_store_key(const std::string& dir);

// Reads a file that nothing vouches for: opened with O_NOFOLLOW (unless `follow_links`) and
// O_NONBLOCK, read only when it is a regular file of at most `limit` bytes without holes. Missing:
// state Missing; anything else that is not such a file: Refused, with why.
Fetched read_untrusted(const std::string& path, size_t limit, bool follow_links = false);

}  // namespace kamera
