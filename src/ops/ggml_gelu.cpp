// ggml's f16 GELU table (ops/ggml_gelu.h), built once on first use.
#include "ops/ggml_gelu.h"

#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace kamera {

namespace {

uint16_t table_entry(uint16_t h) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCubic = 0.044715f;
  const float x = f16_to_f32(h);
  const float inner = kSqrt2OverPi * x * std::fma(kCubic * x, x, 1.0f);
  return f32_to_f16(0.5f * x * (1.0f + std::tanh(inner)));
}

const std::vector<uint16_t>& table() {
  static const std::vector<uint16_t> t = [] {
    std::vector<uint16_t> v(65536);
    for (uint32_t h = 0; h < 65536; ++h) v[h] = table_entry(uint16_t(h));
    return v;
  }();
  return t;
}

}  // namespace

uint16_t ggml_gelu_f16(uint16_t h) {
  return table()[h];
}

void gelu_tanh_mul_ggml(float* gate, const float* up, int64_t n, ThreadPool* pool) {
  const uint16_t* t = table().data();
  auto range = [gate, up, t](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      const float x = gate[i];
      gate[i] = x <= -10.0f ? 0.0f : x >= 10.0f ? x * up[i] : f16_to_f32(t[f32_to_f16(x)]) * up[i];
    }
  };
  if (pool && n >= 16384) {
    pool->parallel_for(n, range);
  } else {
    range(0, n);
  }
}

}  // namespace kamera
