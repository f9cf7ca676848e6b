// Decode attention at depth, split over the keys (flash-decoding): the visible keys are cut into
// fixed blocks of kSplitBlock; each block is one task that widens and rotates its key rows once
// into a small tile (f32 value rows are read in place, narrower ones widened into the tile),
// scores every query head of the call against each key row while it is in L1 (the heads of a
// KV group share it), and keeps per (query, head) only its partial softmax: the block's max, its
// sum of exponentials and its weighted value sum. The partials are merged in block order.
//
// The per-head path it replaces at depth gathered every key and value of the sequence into an
// f32 workspace and then streamed that workspace once per query head (14 times for the 0.5b
// shape), from L3 or memory once it outgrew L2 (docs/BENCHMARKS.md, "Decode at depth").
//
// Blocks do not depend on the thread count, so the result is the same bits on any pool. Used by
// attention_paged for few queries over many keys without a mask, window or mass capture;
// shorter calls keep the per-head path, which sums in ggml's order (llama.cpp parity tests).
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/pos.h"
#include "ops/attention.h"
#include "ops/rope.h"

namespace kamera {

inline constexpr int kSplitBlock = 128;     // keys per task
inline constexpr int kSplitMinKeys = 1024;  // fewer visible keys: the per-head path

// One call's inputs. reach[t]: the last key query t reads (0-based, ascending); keys are the
// rows slots[0 .. reach.back()] of the arenas (slots[j] < 0 reads zeros).
struct SplitDecodeArgs {
  AttentionShape shape;
  const float* q = nullptr;  // T x n_heads x head_dim, rotated
  std::span<const int> reach;
  const void* k_arena = nullptr;
  const void* v_arena = nullptr;
  DType kv_dtype = DType::F32;
  std::span<const int32_t> slots;
  std::span<const Pos> positions;
  const RopeCache* rope = nullptr;
  bool rotate_keys = true;
  float scale = 0;
  const float* sinks = nullptr;  // n_heads logits or null
};

// out: T x n_heads x head_dim.
// Scratch: thread_local buffers of the calling thread and the pool's (no AttentionWorkspace
// fields, whose layout the model's Engine embeds).
void attention_split_decode(const SplitDecodeArgs& a, float* out, ThreadPool& pool);

}  // namespace kamera
