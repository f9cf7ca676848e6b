// Reading one cached token for attention: its key row widened to f32 and rotated to the token's
// position (keys are stored pre-rotation, position-free), its value row widened, or read in
// place when the arena holds f32. The per-head path's gather (ops/attention.cpp) and the split
// path's tiles (ops/attention_split.cpp) both read rows through it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/pos.h"
#include "ops/rope.h"

namespace kamera {

class KvRowReader {
 public:
  // Arenas of rows of n_kv_heads * head_dim values of dtype; rotate: keys go through `rope`.
  KvRowReader(const void* k_arena, const void* v_arena, DType dtype, int n_kv_heads, int head_dim,
              const RopeCache& rope, bool rotate);

  int width() const { return width_; }  // floats per row
  // The key of arena row `slot` (>= 0) into kd (width() floats), rotated to `pos`.
  void load_key(int32_t slot, Pos pos, float* kd) const;
  // The value of arena row `slot` (>= 0) widened into vd (width() floats).
  void load_value(int32_t slot, float* vd) const;
  // The value of arena row `slot` (>= 0): the arena's own row when it holds f32, else widened
  // into vd and vd returned.
  const float* value_row(int32_t slot, float* vd) const;

 private:
  const uint8_t* k_;
  const uint8_t* v_;
  DType dtype_;
  int n_kv_heads_, width_;
  size_t row_bytes_;
  const RopeCache* rope_;
  bool rotate_;
};

}  // namespace kamera
