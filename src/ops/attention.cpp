#include "ops/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "ops/attention_split.h"
#include "ops/clones.h"
#include "ops/gemm.h"
#include "ops/kernels.h"
#include "ops/kv_rows.h"

namespace kamera {

namespace {

constexpr int kQueryBlock = 256;  // queries per score block in the GEMM path
constexpr int kGemmMinQueries = 8;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The sum of 16 lanes in the order of _mm512_reduce_add_ps (halves, quarters, pairs), which is
// how llama.cpp's CPU matrix products (llamafile's tinyBLAS) finish a dot product.
inline float tree16(const float* l) {
  float h[8], q[4];
  for (int i = 0; i < 8; ++i) h[i] = l[i + 8] + l[i];
  for (int i = 0; i < 4; ++i) q[i] = h[i + 4] + h[i];
  return (q[0] + q[2]) + (q[1] + q[3]);
}

// row[j] = q . K[j] for n keys of hd values, K rows `stride` floats apart.
KAMERA_CLONES void score_row(const float* q, const float* K, int n, int stride, int hd,
                             float* row) {
  for (int j = 0; j < n; ++j) {
    const float* kj = K + size_t(j) * stride;
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int i = 0; i < hd; ++i) acc += q[i] * kj[i];
    row[j] = acc;
  }
}

// out = sum_j row[j] V[j] for n values rows of hd, `stride` floats apart: key j into lane j % 16
// of each output by an fma, the lanes added by tree16 (ggml's order over the keys).
KAMERA_CLONES void weighted_sum(const float* row, const float* V, int n, int stride, int hd,
                                float* out) {
  thread_local std::vector<float> acc;
  acc.assign(size_t(16) * hd, 0.0f);
  for (int j = 0; j < n; ++j) {
    const float w = row[j];
    if (w == 0.0f) continue;  // fma(0, v, a) = a
    const float* vj = V + size_t(j) * stride;
    float* a = acc.data() + size_t(j % 16) * hd;
    for (int i = 0; i < hd; ++i) a[i] = std::fma(w, vj[i], a[i]);
  }
  for (int i = 0; i < hd; ++i) {
    float l[16];
    for (int k = 0; k < 16; ++k) l[k] = acc[size_t(k) * hd + i];
    out[i] = tree16(l);
  }
}

// Gathers N keys (rotated to their positions) and values into contiguous N x width f32
// buffers, widening rows stored in another dtype on the way.
void gather_kv(const KvRowReader& rows, std::span<const int32_t> slots,
               std::span<const Pos> positions, int N, float* k_out, float* v_out,
               ThreadPool& pool) {
  const int width = rows.width();
  auto gather = [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      float* kd = k_out + size_t(j) * width;
      float* vd = v_out + size_t(j) * width;
      if (slots[j] < 0) {  // no row (a bounded pool's dropped window row): outside every window
        std::fill(kd, kd + width, 0.0f);
        std::fill(vd, vd + width, 0.0f);
        continue;
      }
      rows.load_key(slots[j], positions[j], kd);
      rows.load_value(slots[j], vd);
    }
  };
  if (int64_t(N) * width < 1 << 16) {
    gather(0, N);  // small: not worth waking the workers
  } else {
    pool.parallel_for(N, std::cref(gather));  // a reference: std::function does not allocate
  }
}

// row[j] *= scale for j < n; returns the largest scaled value.
KAMERA_CLONES float scale_and_max(float* row, int n, float scale) {
  float mx = kNegInf;
#pragma omp simd reduction(max : mx)
  for (int j = 0; j < n; ++j) {
    row[j] *= scale;
    mx = row[j] > mx ? row[j] : mx;
  }
  return mx;
}

// The first key any of the T queries reads through a sliding window (0 without one): keys
// before it sit at least `window` positions below the lowest query (so below every query's
// window), never past the first query's own key (queries ascend).
template <class OwnKey>
int first_window_key(std::span<const Pos> positions, int window, int T, const OwnKey& own_key) {
  if (window <= 0) return 0;
  int64_t lowest = INT64_MAX;
  for (int t = 0; t < T; ++t) lowest = std::min<int64_t>(lowest, positions[size_t(own_key(t))].t);
  const int cap = own_key(0);
  int k0 = 0;
  while (k0 < cap && lowest - positions[size_t(k0)].t >= window) ++k0;
  return k0;
}

}  // namespace

void finish_score_row(float* row, int t, int n_keys, int last_key, float scale,
                      const AttentionMask* mask, const ScoreWindow* win, float sink, int reach) {
  const int last = std::min(n_keys - 1, std::max(last_key, reach));  // the cut
  std::fill(row + last + 1, row + n_keys, 0.0f);  // causally invisible: zero weight
  float mx = scale_and_max(row, last + 1, scale);
  if (win && win->window > 0) {
    const int64_t qp = win->positions[size_t(last_key)].t;
    for (int j = 0; j <= last; ++j)
      if (qp - int64_t(win->positions[size_t(j)].t) >= win->window) row[j] = kNegInf;
  }
  if (mask || (win && win->window > 0)) {
    for (int j = 0; mask && j <= last; ++j)
      if (mask->hidden(t, j)) row[j] = kNegInf;
    mx = kNegInf;
    for (int j = 0; j <= last; ++j) mx = std::max(mx, row[j]);
  }
  if (mx == kNegInf) {  // everything hidden: attend nothing
    std::fill(row, row + n_keys, 0.0f);
    return;
  }
  if (sink == kNegInf) return softmax_given_max(row, last + 1, mx);
  mx = std::max(mx, sink);
  softmax_given_max(row, last + 1, mx, std::exp(sink - mx));
}

void attention_paged(const AttentionShape& s, const float* q, int T, int first, const void* k_arena,
                     const void* v_arena, std::span<const int32_t> slots,
                     std::span<const Pos> positions, const RopeCache& rope,
                     const AttentionMask* mask, float* out, ThreadPool& pool,
                     AttentionWorkspace& ws, const AttentionExtras& extras) {
  const bool indexed = !extras.query_index.empty();
  KAMERA_ASSERT(!indexed || int(extras.query_index.size()) == T);
  auto own_key = [&](int t) { return indexed ? extras.query_index[t] : first + t; };
  const bool reaching = !extras.query_reach.empty();
  KAMERA_ASSERT(!reaching || int(extras.query_reach.size()) == T);
  // The last key query t reads (non-decreasing in t): its own token, or its span's last.
  auto own_reach = [&](int t) { return reaching ? extras.query_reach[t] : own_key(t); };
  KAMERA_ASSERT(int(slots.size()) >= own_reach(T - 1) + 1 &&
                int(positions.size()) >= own_reach(T - 1) + 1);
  const bool has_mask = mask && !mask->blocks.empty();
  // Keys [0, k0) are outside every query's window: neither gathered nor scored (key j below is
  // token k0 + j). A span's rows read later keys, never earlier ones: k0 is the same.
  const int k0 = has_mask ? 0 : first_window_key(positions, extras.window, T, own_key);
  slots = slots.subspan(size_t(k0));
  positions = positions.subspan(size_t(k0));
  auto last_of = [&](int t) { return own_key(t) - k0; };
  auto reach_of = [&](int t) { return own_reach(t) - k0; };
  int N = reach_of(T - 1) + 1;
  KAMERA_ASSERT(s.n_heads % s.n_kv_heads == 0);
  const int hd = s.head_dim;
  const int kvw = s.n_kv_heads * hd;
  const int qw = s.n_heads * hd;
  const int group = s.n_heads / s.n_kv_heads;
  const float scale = extras.scale > 0 ? extras.scale : 1.0f / std::sqrt(float(hd));
  if ((T < kGemmMinQueries || extras.per_row) && N >= kSplitMinKeys && extras.split && !has_mask &&
      !extras.key_mass && extras.window <= 0) {
    // Decode at depth: the queries that read >= kSplitMinKeys keys split over the keys
    // (ops/attention_split.h); earlier ones of the batch take the per-head path below, as they
    // would alone, so a query's result does not depend on its batch (speculative checks: a
    // draft's rows, per_row, take this path at any count).
    int t0 = 0;
    while (reach_of(t0) + 1 < kSplitMinKeys) ++t0;
    thread_local std::vector<int> reach;  // this thread's: no allocation once grown
    reach.resize(size_t(T - t0));
    for (int t = t0; t < T; ++t) reach[size_t(t - t0)] = reach_of(t);
    const SplitDecodeArgs sa{s,       q + size_t(t0) * qw, reach, k_arena,
                             v_arena, extras.kv_dtype,     slots, positions,
                             &rope,   extras.rotate_keys,  scale, extras.sinks};
    attention_split_decode(sa, out + size_t(t0) * qw, pool);
    if (t0 == 0) return;
    T = t0;
    N = reach_of(T - 1) + 1;
  }
  if (ws.k.size() < size_t(N) * kvw) {
    ws.k.resize(size_t(N) * kvw);
    ws.v.resize(size_t(N) * kvw);
  }
  const KvRowReader rows(k_arena, v_arena, extras.kv_dtype, s.n_kv_heads, hd, rope,
                         extras.rotate_keys);
  gather_kv(rows, slots, positions, N, ws.k.data(), ws.v.data(), pool);
  const ScoreWindow win{positions, extras.window};
  float* const key_mass = extras.key_mass ? extras.key_mass + k0 : nullptr;

  // Masks, scales and normalizes one score row of query t and head h over keys [0, n_keys).
  auto finish_row = [&](float* row, int t, int h, int n_keys) {
    finish_score_row(row, t, n_keys, last_of(t), scale, has_mask ? mask : nullptr,
                     win.window > 0 ? &win : nullptr, extras.sinks ? extras.sinks[h] : kNegInf,
                     reach_of(t));
  };
  auto add_mass = [&](const float* row, int n_keys) {
    if (key_mass)
      for (int j = 0; j < n_keys; ++j) key_mass[j] += row[j];
  };

  if (T >= kGemmMinQueries && !extras.per_row) {
    // Score blocks through sgemm: S = Q_h K_g^T, then O_h = softmax(S) V_g. One task per (head,
    // query block), spread over the pool, each with its own score block and sgemm on its own
    // thread (OpenBLAS's threads would otherwise spin between calls and take the pool's cores).
    // Mass capture accumulates into one buffer: its tasks run in order on this thread.
    const int qb = std::min(T, kQueryBlock);
    const int n_blocks = (T + qb - 1) / qb;
    const int pieces = extras.key_mass ? 1 : pool.size();
    if (ws.scores.size() < size_t(pieces) * qb * N) ws.scores.resize(size_t(pieces) * qb * N);
    auto run = [&](int64_t a, int64_t b, int piece) {
      float* S = ws.scores.data() + size_t(piece) * qb * N;
      for (int64_t task = a; task < b; ++task) {
        const int h = int(task / n_blocks), t0 = int(task % n_blocks) * qb;
        const int g = h / group;
        const int t1 = std::min(T, t0 + qb);
        const int rows = t1 - t0;
        const int n_keys = reach_of(t1 - 1) + 1;  // later keys are never seen by this block
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n_keys, hd, 1.0f,
                    q + size_t(t0) * qw + size_t(h) * hd, qw, ws.k.data() + size_t(g) * hd, kvw,
                    0.0f, S, n_keys);
        for (int r = 0; r < rows; ++r) finish_row(S + size_t(r) * n_keys, t0 + r, h, n_keys);
        for (int r = 0; r < rows; ++r) add_mass(S + size_t(r) * n_keys, n_keys);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, n_keys, 1.0f, S, n_keys,
                    ws.v.data() + size_t(g) * hd, kvw, 0.0f, out + size_t(t0) * qw + size_t(h) * hd,
                    qw);
      }
    };
    if (pieces == 1) {
      run(0, int64_t(s.n_heads) * n_blocks, 0);  // OpenBLAS may use its threads here
    } else {
      const BlasOnCallingThread one_thread_each;
      pool.parallel_pieces(int64_t(s.n_heads) * n_blocks, std::cref(run));
    }
    return;
  }

  // Few queries (decode): one task per (query, head), dot products and axpy.
  const int tasks = T * s.n_heads;
  // Small jobs (and mass capture, which accumulates into one buffer) run on this thread.
  const bool small = int64_t(N) * T * s.n_heads * hd < 1 << 15 || extras.key_mass;
  const int threads = pool.size();
  if (ws.scores.size() < size_t(threads) * N) ws.scores.resize(size_t(threads) * N);
  auto run_tasks = [&](int64_t a, int64_t b, int piece) {
    float* row = ws.scores.data() + size_t(piece) * N;
    for (int64_t task = a; task < b; ++task) {
      const int t = int(task / s.n_heads), h = int(task % s.n_heads);
      const int g = h / group;
      const int n_keys = reach_of(t) + 1;
      const float* qh = q + size_t(t) * qw + size_t(h) * hd;
      score_row(qh, ws.k.data() + size_t(g) * hd, n_keys, kvw, hd, row);
      finish_row(row, t, h, n_keys);
      add_mass(row, n_keys);
      weighted_sum(row, ws.v.data() + size_t(g) * hd, n_keys, kvw, hd,
                   out + size_t(t) * qw + size_t(h) * hd);
    }
  };
  if (small) {
    run_tasks(0, tasks, 0);
  } else {
    pool.parallel_pieces(tasks, std::cref(run_tasks));
  }
}

}  // namespace kamera
