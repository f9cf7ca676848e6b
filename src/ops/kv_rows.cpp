#include "ops/kv_rows.h"

#include "core/status.h"
#include "kv/kv_row.h"

namespace kamera {

namespace {
constexpr int kMaxPairs = 512;  // rope_angles_for's scratch: 2 * kMaxPairs floats
}  // namespace

KvRowReader::KvRowReader(const void* k_arena, const void* v_arena, DType dtype, int n_kv_heads,
                         int head_dim, const RopeCache& rope, bool rotate)
    : k_(static_cast<const uint8_t*>(k_arena)),
      v_(static_cast<const uint8_t*>(v_arena)),
      dtype_(dtype),
      n_kv_heads_(n_kv_heads),
      width_(n_kv_heads * head_dim),
      row_bytes_(size_t(width_) * kv_elem_bytes(dtype)),
      rope_(&rope),
      rotate_(rotate) {
  KAMERA_ASSERT(rope.desc().n_pairs() <= kMaxPairs);
}

void KvRowReader::load_key(int32_t slot, Pos pos, float* kd) const {
  kv_load_row(dtype_, k_ + size_t(slot) * row_bytes_, kd, width_);
  if (!rotate_) return;
  float scratch[2 * kMaxPairs];
  const float *c, *sn;
  rope_angles_for(*rope_, pos, scratch, &c, &sn);
  rope_apply(rope_->desc(), c, sn, kd, n_kv_heads_);
}

void KvRowReader::load_value(int32_t slot, float* vd) const {
  kv_load_row(dtype_, v_ + size_t(slot) * row_bytes_, vd, width_);
}

const float* KvRowReader::value_row(int32_t slot, float* vd) const {
  if (dtype_ == DType::F32) return reinterpret_cast<const float*>(v_ + size_t(slot) * row_bytes_);
  load_value(slot, vd);
  return vd;
}

}  // namespace kamera
