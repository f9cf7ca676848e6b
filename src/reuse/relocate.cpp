#include "reuse/relocate.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace kamera {

void relocate_rope_channel(const RopeCache& rope, int n_heads, float* rows, int n, int stride,
                           std::span<const Pos> positions, bool inverse, ThreadPool* pool) {
  KAMERA_ASSERT(int(positions.size()) >= n);
  const int half = rope.desc().n_pairs();
  auto work = [&](int64_t a, int64_t b) {
    std::vector<float> scratch(2 * size_t(half));
    for (int64_t i = a; i < b; ++i) {
      const float *c, *s;
      rope_angles_for(rope, positions[i], scratch.data(), &c, &s);
      rope_apply(rope.desc(), c, s, rows + size_t(i) * stride, n_heads, inverse);
    }
  };
  if (pool && int64_t(n) * n_heads * rope.desc().n_rot >= (1 << 15)) {
    pool->parallel_for(n, work);
  } else {
    work(0, n);
  }
}

int64_t ulp_distance(float a, float b) {
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? int64_t(INT32_MIN) - int64_t(i) : int64_t(i);  // monotone in the value
  };
  return std::llabs(key(a) - key(b));
}

}  // namespace kamera
