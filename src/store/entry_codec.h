// Binary form of store entries, for the disk and Redis tiers. Every blob carries a header that
// names the model it belongs to and a checksum of its payload, so a corrupt or foreign entry is
// detected and discarded, never served:
//   "KMRA" | u32 version | u32 kind (1 canonical, 2 patch) | u64 model fingerprint hi, lo |
//   u64 payload bytes | u64 XXH3-64 of the payload | payload [| 32-byte MAC]
// Version 1 has no MAC. Version 2, written under a store key (a server secret), ends with
// HMAC-SHA256(key, header | payload): a tier shared with others (Redis) or writable by others
// (a directory) cannot be fed an entry that was not written under the key, since the XXH3
// checksum alone can be recomputed by anyone. A reader with a key accepts only version 2 with a
// valid MAC; a reader without one only version 1.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "store/store.h"

namespace kamera {

using Fingerprint = std::array<uint64_t, 2>;

// `key`: the store key (empty: version 1, no MAC).
std::string serialize_canonical(const CanonicalEntry& e, const Fingerprint& model,
                                std::string_view key = {});
std::string serialize_patch(const PatchEntry& e, const Fingerprint& model,
                            std::string_view key = {});

// Fail (with a message saying why) on a wrong magic/version/kind, another model's fingerprint, a
// missing or wrong MAC (then *forged is set, when given), a checksum mismatch, or a malformed
// payload. Never reads out of bounds.
Result<std::shared_ptr<CanonicalEntry>> deserialize_canonical(std::string_view blob,
                                                              const Fingerprint& model,
                                                              std::string_view key = {},
                                                              bool* forged = nullptr);
Result<std::shared_ptr<PatchEntry>> deserialize_patch(std::string_view blob,
                                                      const Fingerprint& model,
                                                      std::string_view key = {},
                                                      bool* forged = nullptr);

// An image's placed embedding rows (kind 3), sealed and opened like the entries above.
std::string serialize_image(const ImageEntry& e, const Fingerprint& model,
                            std::string_view key = {});
Result<std::shared_ptr<ImageEntry>> deserialize_image(std::string_view blob,
                                                      const Fingerprint& model,
                                                      std::string_view key = {},
                                                      bool* forged = nullptr);

// Shape checks of entries against the model's KV layout (a valid checksum does not make an entry
// trustworthy: the layout decides what may be written into the pool).
Status check_canonical_fits(const CanonicalEntry& e, const KvLayout& layout);
Status check_patch_fits(const PatchEntry& e, const KvLayout& layout);

// The largest blob a valid entry can be for a model of `layout` whose chunks hold at most
// `max_tokens` tokens (or embedding rows `embed_dim` wide): a canonical at f32, a full-rank patch
// (its factors hold at most twice a canonical's values), an image's rows, plus headers. A tier
// refuses a larger one unread.
size_t entry_size_limit(const KvLayout& layout, int64_t max_tokens, int64_t embed_dim);
// The limit a tier applies when it is given none: chunks of up to 32,768 tokens, rows up to 8,192
// wide.
size_t default_entry_size_limit(const KvLayout& layout);

// Sealing and opening the entries of one model under one store key: what every tier writes, and
// the one way a blob read back becomes an entry a tier may serve (opened: magic, version, kind,
// fingerprint, MAC, checksum; shaped for the layout; holding the id or key it was looked up under).
class TierCodec {
 public:
  // max_entry_bytes 0: default_entry_size_limit(layout).
  TierCodec(const Fingerprint& fp, KvLayout layout, std::string key, size_t max_entry_bytes = 0);

  std::string seal(const CanonicalEntry& e) const;
  std::string seal(const PatchEntry& e) const;
  std::string seal(const ImageEntry& e) const;
  // `forged` (optional) as in deserialize_canonical.
  Result<std::shared_ptr<CanonicalEntry>> open_canonical(std::string_view blob, const ChunkId& id,
                                                         bool* forged = nullptr) const;
  Result<std::shared_ptr<PatchEntry>> open_patch(std::string_view blob, const PatchKey& key,
                                                 bool* forged = nullptr) const;
  Result<std::shared_ptr<ImageEntry>> open_image(std::string_view blob, const ChunkId& key,
                                                 bool* forged = nullptr) const;

  const Fingerprint& fingerprint() const { return fp_; }
  const std::string& key() const { return key_; }
  size_t max_entry_bytes() const { return max_bytes_; }

 private:
  Fingerprint fp_;
  KvLayout layout_;
  std::string key_;
  size_t max_bytes_;
};

// Random bytes for a new store key (from the OS's generator).
std::string random_store_key(size_t bytes = 32);

// A stable name for a patch key (hex of a 128-bit hash of all its fields).
std::string patch_key_name(const PatchKey& k);

}  // namespace kamera
