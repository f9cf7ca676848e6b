// The inputs of ref_q8_0.cpp and ref_gelu.cpp, shared with the test that reads their outputs
// (tests/unit/ops/test_ggml_numerics.cpp builds the same values from this header).
#pragma once

#include <cmath>
#include <cstdint>

namespace ggml_numerics_fixture {

constexpr int kRows = 64, kCols = 256, kActRows = 7;  // a Q8_0 matrix, f32 activation rows
constexpr int kGeluSweep = 4096;                      // f32 inputs off the f16 grid

inline uint32_t mix(uint32_t a, uint32_t b) {
  uint32_t h = a * 2654435761u ^ (b + 0x9e3779b9u + (a << 6) + (a >> 2));
  h ^= h >> 15;
  h *= 2246822519u;
  return h ^ (h >> 13);
}

// Weight row r, block b: its f16 scale's bits (about 2^-10 .. 2^-6) and quant j in [-127, 127].
inline uint16_t weight_scale_bits(int r, int b) {
  return uint16_t(0x1400 + mix(uint32_t(r), uint32_t(b) + 7777u) % 0x1000);
}
inline int8_t weight_quant(int r, int b, int j) {
  return int8_t(int(mix(uint32_t(r * 1000 + b), uint32_t(j)) % 255u) - 127);
}

// Activation row i, value k: full 24-bit mantissas, magnitudes varying by block.
inline float act_value(int i, int k) {
  const uint32_t h = mix(uint32_t(i) + 555u, uint32_t(k));
  const float v = std::ldexp(float(0x800000u | (h & 0x7fffffu)), int((k / 32 + i) % 5) - 25);
  return (h >> 30) & 1 ? -v : v;
}

// GELU's sweep: x from -12 to 12, off the f16 grid; the gate's other factor g.
inline float gelu_x(int i) {
  return -12.0f + 24.0f * (float(i) + 0.37f) / float(kGeluSweep);
}
inline float gelu_g(int i) {
  return (i % 3 == 0 ? -1.0f : 1.0f) * (0.5f + float(i % 11) * 0.1234567f);
}

}  // namespace ggml_numerics_fixture
