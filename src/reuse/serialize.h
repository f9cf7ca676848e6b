// Binary form of store entries, for the disk and Redis tiers. Every blob carries a header that
// names the model it belongs to and a checksum of its payload, so a corrupt or foreign entry is
// detected and discarded, never served:
//   "KMRA" | u32 version | u32 kind (1 canonical, 2 patch) | u64 model fingerprint hi, lo |
//   u64 payload bytes | u64 XXH3-64 of the payload | payload
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "reuse/store.h"

namespace kamera {

using Fingerprint = std::array<uint64_t, 2>;

std::string serialize_canonical(const CanonicalEntry& e, const Fingerprint& model);
std::string serialize_patch(const PatchEntry& e, const Fingerprint& model);

// Fail (with a message saying why) on a wrong magic/version/kind, another model's fingerprint, a
// checksum mismatch, or a malformed payload. Never reads out of bounds.
Result<std::shared_ptr<CanonicalEntry>> deserialize_canonical(std::string_view blob,
                                                              const Fingerprint& model);
Result<std::shared_ptr<PatchEntry>> deserialize_patch(std::string_view blob,
                                                      const Fingerprint& model);

// A stable name for a patch key (hex of a 128-bit hash of all its fields).
std::string patch_key_name(const PatchKey& k);

}  // namespace kamera
