#include "ops/attention_mla.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kv/kv_row.h"

namespace kamera {

void attention_mla(const MlaShape& s, const float* q, int T, int first, const float* wkv_b,
                   const void* c_arena, const void* kpe_arena, std::span<const int32_t> slots,
                   std::span<const Pos> positions, const RopeCache& rope, const AttentionMask* mask,
                   float scale, float* out, ThreadPool& pool, MlaWorkspace& ws,
                   const AttentionExtras& extras) {
  const bool indexed = !extras.query_index.empty();
  KAMERA_ASSERT(!indexed || int(extras.query_index.size()) == T);
  auto last_of = [&](int t) { return indexed ? extras.query_index[t] : first + t; };
  const int N = last_of(T - 1) + 1;
  KAMERA_ASSERT(int(slots.size()) >= N && int(positions.size()) >= N);
  const int L = s.kv_lora, R = s.qk_rope, dq = s.qk_nope + s.qk_rope, qw = s.n_heads * dq;
  const int ow = s.n_heads * s.v_head, wrows = s.qk_nope + s.v_head;
  if (ws.c.size() < size_t(N) * L) ws.c.resize(size_t(N) * L);
  if (ws.kpe.size() < size_t(N) * R) ws.kpe.resize(size_t(N) * R);
  // Gather the latents and the rotated k_pe of every visible token.
  const int half = rope.desc().n_pairs();
  const DType dt = extras.kv_dtype;
  const size_t eb = kv_elem_bytes(dt);
  const auto* cb = static_cast<const uint8_t*>(c_arena);
  const auto* kb = static_cast<const uint8_t*>(kpe_arena);
  pool.parallel_for(N, [&](int64_t j0, int64_t j1) {
    std::vector<float> scratch(2 * size_t(half));
    for (int64_t j = j0; j < j1; ++j) {
      kv_load_row(dt, cb + size_t(slots[j]) * L * eb, ws.c.data() + size_t(j) * L, L);
      float* kd = ws.kpe.data() + size_t(j) * R;
      kv_load_row(dt, kb + size_t(slots[j]) * R * eb, kd, R);
      const float *c, *sn;
      rope_angles_for(rope, positions[j], scratch.data(), &c, &sn);
      rope_apply(rope.desc(), c, sn, kd, 1);
    }
  });
  constexpr int kBlock = 256;
  const int qb = std::min(T, kBlock);
  if (ws.qabs.size() < size_t(qb) * L) ws.qabs.resize(size_t(qb) * L);
  if (ws.olat.size() < size_t(qb) * L) ws.olat.resize(size_t(qb) * L);
  if (ws.scores.size() < size_t(qb) * N) ws.scores.resize(size_t(qb) * N);
  for (int h = 0; h < s.n_heads; ++h) {
    const float* wkb = wkv_b + size_t(h) * wrows * L;  // qk_nope rows of kv_lora
    const float* wvb = wkb + size_t(s.qk_nope) * L;    // v_head rows of kv_lora
    for (int t0 = 0; t0 < T; t0 += qb) {
      const int rows = std::min(T, t0 + qb) - t0, n_keys = last_of(t0 + rows - 1) + 1;
      const float* qh = q + size_t(t0) * qw + size_t(h) * dq;
      float* S = ws.scores.data();
      // absorbed query: (rows x nope) . (nope x L)
      if (s.qk_nope > 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, L, s.qk_nope, 1.0f, qh, qw,
                    wkb, L, 0.0f, ws.qabs.data(), L);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n_keys, L, 1.0f, ws.qabs.data(),
                    L, ws.c.data(), L, 0.0f, S, n_keys);
      } else {
        std::fill(S, S + size_t(rows) * n_keys, 0.0f);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n_keys, R, 1.0f, qh + s.qk_nope,
                  qw, ws.kpe.data(), R, 1.0f, S, n_keys);
      pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          finish_score_row(S + size_t(r) * n_keys, t0 + int(r), n_keys, last_of(t0 + int(r)), scale,
                           mask);
      });
      if (extras.key_mass)
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < n_keys; ++j) extras.key_mass[j] += S[size_t(r) * n_keys + j];
      // latent-weighted sum, then the value projection
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, L, n_keys, 1.0f, S, n_keys,
                  ws.c.data(), L, 0.0f, ws.olat.data(), L);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, s.v_head, L, 1.0f, ws.olat.data(),
                  L, wvb, L, 0.0f, out + size_t(t0) * ow + size_t(h) * s.v_head, ow);
    }
  }
}

}  // namespace kamera
