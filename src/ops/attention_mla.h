// Multi-head latent attention (DeepSeek-V2) over a paged cache that holds, per token, only the
// latent c_kv (kv_lora_rank, content) and the shared k_pe (qk_rope, rope channel, pre-rotation).
//
// Absorbed form: for head h with W_kb (qk_nope x kv_lora) and W_vb (v_head x kv_lora) from wkv_b,
//   score(t, j) = (W_kb^T q_nope(t)) . c_j + q_pe(t) . R(p_j) k_pe_j
//   out_h(t)    = W_vb (sum_j p(t, j) c_j)
// which equals attention over the expanded keys [W_kb c_j ; R k_pe_j] and values W_vb c_j, without
// ever expanding them per token.
#pragma once

#include <span>
#include <vector>

#include "ops/attention.h"

namespace kamera {

struct MlaShape {
  int n_heads = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_head = 0;
};

struct MlaWorkspace {
  std::vector<float> c, kpe, qabs, scores, olat;
};

// q: T x n_heads x (qk_nope + qk_rope), the rope part already rotated; queries are the last T
// tokens (query t = token first + t), or the tokens extras.query_index names. wkv_b:
// n_heads*(qk_nope+v_head) x kv_lora. c_arena / kpe_arena hold rows of extras.kv_dtype.
// out: T x n_heads x v_head.
void attention_mla(const MlaShape& s, const float* q, int T, int first, const float* wkv_b,
                   const void* c_arena, const void* kpe_arena, std::span<const int32_t> slots,
                   std::span<const Pos> positions, const RopeCache& rope, const AttentionMask* mask,
                   float scale, float* out, ThreadPool& pool, MlaWorkspace& ws,
                   const AttentionExtras& extras = {});

}  // namespace kamera
