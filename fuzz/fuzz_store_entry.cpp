// libFuzzer target: store entry blobs (disk / Redis tiers). The fuzzer's bytes get a valid header
// (this model's fingerprint and the payload's checksum) half of the time, so the payload parser
// itself is exercised, not only the header checks.
#include <xxhash.h>

#include <cstring>
#include <string>

#include "store/disk_tier.h"
#include "store/entry_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kamera::Fingerprint fp = {0x1234, 0x5678};
  std::string blob(reinterpret_cast<const char*>(data), size);
  constexpr size_t kHeader = 44;
  if (size >= kHeader && (data[0] & 1)) {
    std::memcpy(&blob[0], "KMRA", 4);
    std::memcpy(&blob[12], &fp[0], 8);
    std::memcpy(&blob[20], &fp[1], 8);
    const uint64_t n = size - kHeader, sum = XXH3_64bits(blob.data() + kHeader, n);
    std::memcpy(&blob[28], &n, 8);
    std::memcpy(&blob[36], &sum, 8);
  }
  kamera::KvLayout layout;
  layout.n_layers = 2;
  layout.channels = {{"k", 8, true}, {"v", 8, false}};
  if (auto c = kamera::deserialize_canonical(blob, fp); c.ok()) {
    (void)kamera::check_canonical_fits(**c, layout);
    (void)kamera::serialize_canonical(**c, fp);
  }
  if (auto p = kamera::deserialize_patch(blob, fp); p.ok()) {
    (void)kamera::check_patch_fits(**p, layout);
    (void)kamera::serialize_patch(**p, fp);
  }
  return 0;
}
