// Position of a cached token. 1-D RoPE reads t (text tokens keep h = w = t); M-RoPE reads all
// three. Positions are metadata of the KV pool, never baked into stored keys.
#pragma once

#include <cstdint>

namespace kamera {

struct Pos {
  int32_t t = 0, h = 0, w = 0;
  static constexpr Pos linear(int32_t p) { return {p, p, p}; }
  constexpr Pos shifted(int32_t delta) const { return {t + delta, h + delta, w + delta}; }
  bool operator==(const Pos&) const = default;
};

}  // namespace kamera
