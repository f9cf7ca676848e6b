// Causal attention of a batch of new queries over a sequence's paged keys and values.
//
// Keys are stored pre-rotation (position-free) in the pool; this kernel gathers each key row by
// its slot, rotates it to the token's current position, and attends. So a token whose position
// metadata changed (relocation) is attended at its new position with no rewrite of its bytes.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/pos.h"
#include "ops/rope.h"

namespace kamera {

class ThreadPool;

// Extra masking on top of causality: keys [k_begin, k_end) (sequence indices) are hidden from
// queries [q_begin, q_end) (indices within the batch). "B may not attend to A" is one block.
struct AttentionMask {
  struct Block {
    int q_begin, q_end, k_begin, k_end;
  };
  std::vector<Block> blocks;
  bool hidden(int q, int k) const {
    for (const Block& b : blocks)
      if (q >= b.q_begin && q < b.q_end && k >= b.k_begin && k < b.k_end) return true;
    return false;
  }
};

struct AttentionShape {
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
};

// Reusable buffers, so that decode steps do not allocate.
struct AttentionWorkspace {
  std::vector<float> k, v, scores;
};

// A sliding window by position (llama.cpp's standard SWA): the query that is token `last` reads
// key j only when positions[last].t - positions[j].t < window.
struct ScoreWindow {
  std::span<const Pos> positions;
  int window = 0;
};

// Turns a row of raw scores q.k of query t (batch index) over keys [0, n_keys) into attention
// weights: scale, causal cut (keys after `last`, the query's own token index, get weight 0;
// reach > last moves the cut to keys after `reach`: a query of a non-causal span), mask, sliding
// window (by the position of token `last`), softmax. A finite sink (gpt-oss's per-head learned
// logit, unscaled and position-free) joins the softmax's maximum and denominator but has no
// value: the weights then sum to less than 1.
void finish_score_row(float* row, int t, int n_keys, int last, float scale,
                      const AttentionMask* mask, const ScoreWindow* window = nullptr,
                      float sink = -std::numeric_limits<float>::infinity(), int reach = -1);

// Optional extras of an attention call.
struct AttentionExtras {
  // Each query's own token index (ascending): query t sees tokens [0, index[t]]. Empty: the
  // queries are the last T tokens, first.. first + T - 1.
  std::span<const int> query_index;
  // Each query's last readable token (non-decreasing, >= its own index): a query of a non-causal
  // span (Gemma 3's picture rows, model/forward.h NonCausalSpan) also reads the span's later
  // tokens, which the caller has written. Empty: each query reads up to its own token.
  std::span<const int> query_reach;
  // When set: += the attention weight each key receives, summed over heads and queries
  // (n_keys floats; an oracle's view of which tokens the queries read).
  float* key_mass = nullptr;
  // Storage of the cached rows the arenas hold (f32, f16 or bf16): converted to f32 on read.
  DType kv_dtype = DType::F32;
  // Per-layer kinds (model/layer_kinds.h): false, the keys are read as stored (a layer without
  // rope); window > 0, a sliding window by position (ScoreWindow); scale > 0 replaces
  // 1 / sqrt(head_dim).
  bool rotate_keys = true;
  int window = 0;
  float scale = 0;
  // gpt-oss's attention sinks: n_heads logits, one per query head (finish_score_row); null: none.
  const float* sinks = nullptr;
  // Every query through the per-row (decode) kernels, whatever T: query t's output is then the
  // one it gets alone, to the bit (a decode step's draft rows: speculative decoding stays exact).
  bool per_row = false;
  // false: the per-head path at any depth, never the split over the keys (ops/attention_split.h);
  // `kamera bench attention` times the two paths against each other.
  bool split = true;
};

// q: T x n_heads x head_dim, already rotated to the queries' positions. The queries are the last
// T tokens of the sequence: query t is token first + t and sees tokens [0, first + t].
// k_arena / v_arena row slots[j] (n_kv_heads * head_dim values of extras.kv_dtype): token j's
// pre-rotation key and value; slots[j] < 0: token j has no row (a window row the pool gave back),
// read as zeros, which the caller guarantees the window hides. out: T x n_heads x head_dim.
void attention_paged(const AttentionShape& shape, const float* q, int T, int first,
                     const void* k_arena, const void* v_arena, std::span<const int32_t> slots,
                     std::span<const Pos> positions, const RopeCache& rope,
                     const AttentionMask* mask, float* out, ThreadPool& pool,
                     AttentionWorkspace& ws, const AttentionExtras& extras = {});

}  // namespace kamera
