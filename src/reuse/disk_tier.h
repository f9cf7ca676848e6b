// The disk tier of the chunk store: one file per entry under a directory, crash-safe writes
// (temporary file, fsync, rename, fsync of the directory), a model fingerprint and a checksum in
// every file. Survives restarts; corrupt or foreign files are detected, deleted and counted, and
// the entry is recomputed by the caller, never served.
#pragma once

#include <mutex>
#include <string>

#include "reuse/serialize.h"

namespace kamera {

class DiskTier : public StoreTier {
 public:
  // Creates <dir>/canonical and <dir>/patch as needed. `layout` is the model's KV layout: an entry
  // whose shapes do not fit it is discarded like a corrupt one.
  static Result<std::shared_ptr<DiskTier>> open(const std::string& dir, const Fingerprint& model,
                                                const KvLayout& layout);

  std::string name() const override { return "disk"; }
  std::shared_ptr<const CanonicalEntry> load_canonical(const ChunkId& id) override;
  std::shared_ptr<const PatchEntry> load_patch(const PatchKey& key) override;
  void save_canonical(const CanonicalEntry& e) override;
  void save_patch(const PatchEntry& e) override;
  void erase_canonical(const ChunkId& id) override;
  Stats stats() const override;

  std::string canonical_path(const ChunkId& id) const;
  std::string patch_path(const PatchKey& key) const;

 private:
  DiskTier(std::string dir, const Fingerprint& fp, KvLayout layout)
      : dir_(std::move(dir)), fp_(fp), layout_(std::move(layout)) {}
  bool write_atomic(const std::string& path, const std::string& blob);
  void save_blob(const std::string& path, const std::string& blob);  // counts writes / errors
  // Reads, decodes and validates one entry; a corrupt or foreign file is discarded (a miss).
  template <class Entry, class Decode>
  std::shared_ptr<const Entry> load_entry(const std::string& path, const Decode& decode);
  std::string read_file(const std::string& path, bool* found);
  void discard(const std::string& path, const std::string& why);

  std::string dir_;
  Fingerprint fp_;
  KvLayout layout_;
  mutable std::mutex mu_;
  Stats stats_;
};

// Shape checks of entries against the model's KV layout (a valid checksum does not make a file
// trustworthy: the layout decides what may be written into the pool).
Status check_canonical_fits(const CanonicalEntry& e, const KvLayout& layout);
Status check_patch_fits(const PatchEntry& e, const KvLayout& layout);

// A stored blob back to an entry that every tier may serve: deserialized (fingerprint and
// checksum), shaped for `layout`, and holding the id / key it was looked up under.
Result<std::shared_ptr<CanonicalEntry>> decode_canonical(std::string_view blob,
                                                         const Fingerprint& fp,
                                                         const KvLayout& layout, const ChunkId& id);
Result<std::shared_ptr<PatchEntry>> decode_patch(std::string_view blob, const Fingerprint& fp,
                                                 const KvLayout& layout, const PatchKey& key);

}  // namespace kamera
