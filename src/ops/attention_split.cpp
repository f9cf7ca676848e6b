#include "ops/attention_split.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "ops/clones.h"
#include "ops/kernels.h"
#include "ops/kv_rows.h"

namespace kamera {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// 16 and 8 floats as one value (GCC/clang vector extensions): each clone lowers them to its
// widest registers (one zmm, two ymm, four xmm), where the loop vectorizer left the dots scalar.
typedef float F16x __attribute__((vector_size(64)));
typedef float F8x __attribute__((vector_size(32)));
typedef float F4x __attribute__((vector_size(16)));

// q . k over hd dims: dim i into lane i % 16, the lanes summed by halves (the order of a vector
// reduction); a tail of hd % 16 dims is added last. One function, so that no vector crosses a
// call (the clones' ABIs differ).
__attribute__((always_inline)) inline float dot16(const float* q, const float* k, int hd) {
  F16x acc = {};
  int i = 0;
  for (; i + 16 <= hd; i += 16) {
    F16x a, b;
    std::memcpy(&a, q + i, sizeof a);
    std::memcpy(&b, k + i, sizeof b);
    acc += a * b;
  }
  const F8x h = __builtin_shufflevector(acc, acc, 0, 1, 2, 3, 4, 5, 6, 7) +
                __builtin_shufflevector(acc, acc, 8, 9, 10, 11, 12, 13, 14, 15);
  const F4x f =
      __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
  float r = (f[0] + f[2]) + (f[1] + f[3]);
  for (; i < hd; ++i) r += q[i] * k[i];
  return r;
}

// s[(t * H + h) * stride + j] = q(t, h) . K[j] (K: n rotated key rows of kvw floats) for every
// query and head; a key row is read once for the heads of all queries.
KAMERA_CLONES void block_scores(const float* q, int T, int H, int group, int hd, int kvw,
                                const float* K, int n, float* s, int stride) {
  for (int j = 0; j < n; ++j) {
    const float* kj = K + size_t(j) * kvw;
    for (int t = 0; t < T; ++t)
      for (int h0 = 0; h0 < H; h0 += group) {  // the heads of one KV group
        const float* k = kj + size_t(h0 / group) * hd;
        for (int h = h0; h < h0 + group; ++h) {
          const size_t th = size_t(t) * H + h;
          s[th * stride + j] = dot16(q + th * hd, k, hd);
        }
      }
  }
}

// Scales a block's raw scores (scale > 0, so the largest raw score gives the largest scaled one)
// and turns them into s[j] = exp(scale s[j] - mx); returns mx, the largest scaled score, and
// their sum in *sum.
KAMERA_CLONES float block_exp_sum(float* s, int n, float scale, float* sum) {
  float raw = kNegInf;
  for (int j = 0; j < n; ++j) raw = s[j] > raw ? s[j] : raw;
  const float mx = raw * scale;
#pragma omp simd
  for (int j = 0; j < n; ++j) s[j] = s[j] * scale - mx;
  exp_inplace(s, n);
  float total = 0.0f;
#pragma omp simd reduction(+ : total)
  for (int j = 0; j < n; ++j) total += s[j];
  *sum = total;
  return mx;
}

// acc[0 .. 16 NV) += sum_j p[j] V[j][off ..]: the head's dims held in NV registers over all
// the keys, even and odd keys in separate sums (two fma chains), added at the end.
template <int NV>
__attribute__((always_inline)) inline void values_in_registers(const float* p,
                                                               const float* const* V, int n,
                                                               int off, float* acc) {
  F16x a[NV], b[NV];
  for (int x = 0; x < NV; ++x) {
    std::memcpy(&a[x], acc + 16 * x, sizeof a[x]);
    b[x] = F16x{};
  }
  int j = 0;
  for (; j + 2 <= n; j += 2) {
    const float *v0 = V[j] + off, *v1 = V[j + 1] + off;
    for (int x = 0; x < NV; ++x) {
      F16x u, w;
      std::memcpy(&u, v0 + 16 * x, sizeof u);
      std::memcpy(&w, v1 + 16 * x, sizeof w);
      a[x] += p[j] * u;
      b[x] += p[j + 1] * w;
    }
  }
  for (; j < n; ++j)
    for (int x = 0; x < NV; ++x) {
      F16x u;
      std::memcpy(&u, V[j] + off + 16 * x, sizeof u);
      a[x] += p[j] * u;
    }
  for (int x = 0; x < NV; ++x) {
    a[x] += b[x];
    std::memcpy(acc + 16 * x, &a[x], sizeof a[x]);
  }
}

// acc[i] += sum_j p[j] V[j][off + i] for n value rows (pointers).
KAMERA_CLONES void block_values(const float* p, const float* const* V, int n, int off, int hd,
                                float* acc) {
  if (hd == 64) return values_in_registers<4>(p, V, n, off, acc);
  if (hd == 128) return values_in_registers<8>(p, V, n, off, acc);
  for (int j = 0; j < n; ++j) {
    const float* v = V[j] + off;
#pragma omp simd
    for (int i = 0; i < hd; ++i) acc[i] += p[j] * v[i];
  }
}

// Per-thread scratch: the rotated key rows, the widened value rows (f32 arenas are read in
// place), the value row pointers, a zero row and the score rows of every (query, head).
struct Tile {
  float *k, *v, *zero, *s;
  const float** vrow;
  static size_t floats(int kvw, int rows) {
    return size_t(2) * kvw * kSplitBlock + kvw + size_t(rows) * kSplitBlock;
  }
  Tile(float* base, int kvw, const float** rows)
      : k(base),
        v(base + size_t(kvw) * kSplitBlock),
        zero(v + size_t(kvw) * kSplitBlock),
        s(zero + kvw),
        vrow(rows) {}
};

// Widens keys [c0, c0 + n) into the tile, rotated, and points at their values.
void fill_tile(const SplitDecodeArgs& a, const KvRowReader& rows, int c0, int n, const Tile& tile) {
  const int kvw = rows.width();
  std::fill(tile.zero, tile.zero + kvw, 0.0f);
  for (int jj = 0; jj < n; ++jj) {
    const int j = c0 + jj;
    float* kd = tile.k + size_t(jj) * kvw;
    if (a.slots[j] < 0) {
      std::fill(kd, kd + kvw, 0.0f);
      tile.vrow[jj] = tile.zero;
      continue;
    }
    rows.load_key(a.slots[j], a.positions[j], kd);
    tile.vrow[jj] = rows.value_row(a.slots[j], tile.v + size_t(jj) * kvw);
  }
}

// Partials of one (query, head, block): max, sum of exponentials, then head_dim value sums.
size_t partial_floats(int hd) {
  return size_t(hd) + 2;
}

// Block b: every (query, head)'s partial over its keys.
void run_block(const SplitDecodeArgs& a, const KvRowReader& rows, int b, const Tile& tile,
               float* partials) {
  const AttentionShape& s = a.shape;
  const int hd = s.head_dim, kvw = s.n_kv_heads * hd, group = s.n_heads / s.n_kv_heads;
  const int T = int(a.reach.size()), N = a.reach.back() + 1;
  const int c0 = b * kSplitBlock, n = std::min(kSplitBlock, N - c0);
  fill_tile(a, rows, c0, n, tile);
  block_scores(a.q, T, s.n_heads, group, hd, kvw, tile.k, n, tile.s, kSplitBlock);
  for (int t = 0; t < T; ++t) {
    const int nv = std::min(n, a.reach[t] + 1 - c0);  // keys of the block this query sees
    for (int h = 0; h < s.n_heads; ++h) {
      const size_t th = size_t(t) * s.n_heads + h;
      float* part = partials + (size_t(b) * T * s.n_heads + th) * partial_floats(hd);
      std::fill(part + 2, part + 2 + hd, 0.0f);
      part[0] = kNegInf;
      part[1] = 0.0f;
      if (nv <= 0) continue;
      float* row = tile.s + th * kSplitBlock;
      part[0] = block_exp_sum(row, nv, a.scale, &part[1]);
      block_values(row, tile.vrow, nv, (h / group) * hd, hd, part + 2);
    }
  }
}

// out(t, h) = sum_b e^(m_b - M) acc_b / (sum_b e^(m_b - M) l_b + e^(sink - M)), blocks in order.
void merge_partials(const SplitDecodeArgs& a, int n_blocks, const float* partials, float* out) {
  const AttentionShape& s = a.shape;
  const int hd = s.head_dim, T = int(a.reach.size());
  const size_t pf = partial_floats(hd);
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < s.n_heads; ++h) {
      float* o = out + (size_t(t) * s.n_heads + h) * hd;
      std::fill(o, o + hd, 0.0f);
      const float sink = a.sinks ? a.sinks[h] : kNegInf;
      float mx = sink;
      for (int b = 0; b < n_blocks; ++b)
        mx = std::max(mx, partials[((size_t(b) * T + t) * s.n_heads + h) * pf]);
      if (mx == kNegInf) continue;  // nothing visible: attend nothing
      float denom = sink == kNegInf ? 0.0f : std::exp(sink - mx);
      for (int b = 0; b < n_blocks; ++b) {
        const float* part = partials + ((size_t(b) * T + t) * s.n_heads + h) * pf;
        if (part[0] == kNegInf) continue;
        const float w = std::exp(part[0] - mx);
        denom += w * part[1];
        for (int i = 0; i < hd; ++i) o[i] += w * part[2 + i];
      }
      const float inv = 1.0f / denom;
      for (int i = 0; i < hd; ++i) o[i] *= inv;
    }
  }
}

}  // namespace

void attention_split_decode(const SplitDecodeArgs& a, float* out, ThreadPool& pool) {
  const AttentionShape& s = a.shape;
  KAMERA_ASSERT(!a.reach.empty() && s.n_heads % s.n_kv_heads == 0);
  const int T = int(a.reach.size()), N = a.reach.back() + 1;
  const int kvw = s.n_kv_heads * s.head_dim;
  const int n_blocks = (N + kSplitBlock - 1) / kSplitBlock;
  // The caller's partials (read by the merge on this thread); each thread's own tile.
  thread_local std::vector<float> partials;
  partials.resize(size_t(n_blocks) * T * s.n_heads * partial_floats(s.head_dim));
  float* const parts = partials.data();
  const KvRowReader reader(a.k_arena, a.v_arena, a.kv_dtype, s.n_kv_heads, s.head_dim, *a.rope,
                           a.rotate_keys);
  auto blocks = [&](int64_t b0, int64_t b1) {
    thread_local std::vector<float> scratch;
    thread_local std::vector<const float*> rows;
    scratch.resize(Tile::floats(kvw, T * s.n_heads));
    rows.resize(kSplitBlock);
    const Tile tile(scratch.data(), kvw, rows.data());
    for (int64_t b = b0; b < b1; ++b) run_block(a, reader, int(b), tile, parts);
  };
  // By reference: a std::function holding a reference wrapper does not allocate.
  pool.parallel_for(n_blocks, std::cref(blocks));
  merge_partials(a, n_blocks, parts, out);
}

}  // namespace kamera
