// Random weight rows of any ggml weight type, for the quantization tests and benchmarks: random
// quant bits (every pattern a file can hold) with the f16 scale fields set to finite values of a
// realistic size, so dequantized weights look like a layer's (|w| around 0.02 to 0.1).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_type.h"

namespace quant_data {

// Byte offsets of the f16 scale fields inside one block of type t (empty for the float types).
inline std::vector<int> scale_offsets(kamera::GgmlType t) {
  using kamera::GgmlType;
  switch (t) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q2_K:
      return {80, 82};
    case GgmlType::Q3_K:
      return {108};
    case GgmlType::Q6_K:
      return {208};
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
      return {};
    default:
      return {0};
  }
}

// Scale of one quant step, by type, so that |w| comes out around 0.05.
inline float step(kamera::GgmlType t) {
  using kamera::GgmlType;
  switch (t) {
    case GgmlType::Q8_0:
      return 0.0005f;
    case GgmlType::IQ4_NL:
      return 0.0006f;
    case GgmlType::Q2_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return 0.0006f;
    case GgmlType::Q3_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS:
      return 0.0002f;
    default:
      return 0.008f;
  }
}

// rows x cols weights of type t (cols a whole number of blocks), row-major.
inline std::vector<uint8_t> random_rows(kamera::GgmlType t, int64_t rows, int64_t cols,
                                        uint32_t seed) {
  using kamera::GgmlType;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  const int bs = kamera::ggml_block_size(t), bb = kamera::ggml_block_bytes(t);
  const int64_t n_blocks = rows * cols / bs;
  std::vector<uint8_t> out(size_t(n_blocks) * size_t(bb));
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float v = normal(rng);
      if (t == GgmlType::F32) {
        std::memcpy(&out[size_t(i) * 4], &v, 4);
      } else {
        const uint16_t h = t == GgmlType::F16 ? kamera::f32_to_f16(v) : kamera::f32_to_bf16(v);
        std::memcpy(&out[size_t(i) * 2], &h, 2);
      }
    }
    return out;
  }
  for (auto& b : out) b = uint8_t(rng());
  if (t == GgmlType::MXFP4) {  // E8M0 exponents: half scales 2^-11 .. 2^-8 (|w| around 0.05)
    for (int64_t b = 0; b < n_blocks; ++b) out[size_t(b) * bb] = uint8_t(117 + rng() % 4);
    return out;
  }
  const std::vector<int> offs = scale_offsets(t);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (size_t k = 0; k < offs.size(); ++k) {
      // the second field of the min types is the min: negative for the k-quants' dmin (they
      // subtract it), any sign for q4_1 / q5_1
      float v = step(t) * u(rng);
      if (k == 1) v = (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) ? -8 * v : v;
      const uint16_t h = kamera::f32_to_f16(v);
      std::memcpy(&out[size_t(b) * bb + offs[k]], &h, 2);
    }
  }
  return out;
}

// n activations like a hidden state: normal, with a few outliers.
inline std::vector<float> random_activations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  for (int64_t i = 0; i < n; i += 97) x[size_t(i)] *= 8.0f;
  return x;
}

// Normalized mean squared error sum (a - b)^2 / sum b^2 (0 when both are zero).
inline double nmse(const float* a, const float* b, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return den == 0.0 ? num : num / den;
}

}  // namespace quant_data
