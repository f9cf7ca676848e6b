// Rotary position embedding over a generic rope description.
//
// A head of head_dim values has its first n_rot dims rotated in n_rot/2 pairs; pair i turns by
// angle pos * freq_scale * theta^(-2i/n_rot). Layouts:
//   Normal (llama2.c, ggml "normal"): pair i = dims (2i, 2i+1)
//   Neox   (GPT-NeoX, Qwen2):         pair i = dims (i, i + n_rot/2)
// Dims >= n_rot pass through (partial rotary). Angles are evaluated in double precision and
// rounded once to f32, so a table lookup and a direct evaluation give the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/pool.h"

namespace kamera {

enum class RopeLayout : uint8_t { Normal, Neox };

struct RopeDesc {
  RopeLayout layout = RopeLayout::Normal;
  int head_dim = 0;
  int n_rot = 0;  // even, <= head_dim
  double theta = 10000.0;
  double freq_scale = 1.0;  // linear position scaling (1 / factor)

  int n_pairs() const { return n_rot / 2; }
};

// cos/sin of every pair for positions [0, max_pos) precomputed; other positions (negative, or
// relocation deltas beyond the table) are evaluated directly with the same formula.
class RopeCache {
 public:
  RopeCache() = default;
  RopeCache(const RopeDesc& desc, int max_pos);

  const RopeDesc& desc() const { return desc_; }
  // Writes n_pairs cos and sin values of position p.
  void angles(Pos p, float* cos_out, float* sin_out) const;
  // Same for a scalar offset (relocation by delta).
  void angles_1d(int64_t p, float* cos_out, float* sin_out) const;
  // Table rows of position p (n_pairs values each), or false when p is outside the table.
  bool table_rows(int64_t p, const float** cos_row, const float** sin_row) const {
    if (p < 0 || p >= max_pos_) return false;
    *cos_row = cos_.data() + size_t(p) * desc_.n_pairs();
    *sin_row = sin_.data() + size_t(p) * desc_.n_pairs();
    return true;
  }

 private:
  RopeDesc desc_;
  int max_pos_ = 0;
  std::vector<double> inv_freq_;  // n_pairs
  std::vector<float> cos_, sin_;  // max_pos x n_pairs
};

// Rotates one token's heads in place: x is n_heads x head_dim. inverse rotates by -angle.
void rope_apply(const RopeDesc& d, const float* cos, const float* sin, float* x, int n_heads,
                bool inverse = false);

// Scalar reference: evaluates angles itself in double and rotates one token (tests only).
void rope_apply_reference(const RopeDesc& d, int64_t pos, float* x, int n_heads, bool inverse);

}  // namespace kamera
