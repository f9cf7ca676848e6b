// R(p): rotates the rows of a rope channel to target positions. Generic over the rope
// description (layout, rotated dims, theta, scaling); M-RoPE and MLA add descriptions, not code.
//
// In kamera's own pool the rope channel stays pre-rotation and attention rotates on read, so
// serving a chunk needs no relocation pass at all (a position is metadata). This kernel produces
// the rotated keys for consumers that want them materialized (exports, exactness checks, engines
// whose attention reads rotated keys) and de-rotates keys captured from such engines.
#pragma once

#include <span>

#include "core/thread_pool.h"
#include "kv/pool.h"
#include "ops/rope.h"

namespace kamera {

// rows: n rows of n_heads x head_dim values, `stride` floats apart. Rotates row i to positions[i]
// (inverse = true: from positions[i] back to position-free).
void relocate_rope_channel(const RopeCache& rope, int n_heads, float* rows, int n, int stride,
                           std::span<const Pos> positions, bool inverse = false,
                           ThreadPool* pool = nullptr);

// Distance in units in the last place between two f32 values (0 when equal, also +0 vs -0).
int64_t ulp_distance(float a, float b);

}  // namespace kamera
