// splitmix64's finalizer: a bijection on 64-bit words in which every input bit changes every
// output bit. For in-memory hashes (prefix block names, image rows in a token sequence), not for
// anything stored or compared across builds.
#pragma once

#include <cstdint>

namespace kamera {

inline uint64_t mix64_finalize(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace kamera
