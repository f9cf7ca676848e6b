// Rotary position embedding over a generic rope description.
//
// A head of head_dim values has its first n_rot dims rotated in n_rot/2 pairs; pair i turns by
// angle pos * freq(i), freq(i) = freq_scale * theta^(-2i/n_rot) (YaRN: see YarnRamp). Layouts:
//   Normal (llama2.c, ggml "normal"): pair i = dims (2i, 2i+1)
//   Neox   (GPT-NeoX, Qwen2):         pair i = dims (i, i + n_rot/2)
// Dims >= n_rot pass through (partial rotary). Angles are evaluated in double precision and
// rounded once to f32, so a table lookup and a direct evaluation give the same bits.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <cstddef>

#include "core/pos.h"

namespace kamera {

enum class RopeLayout : uint8_t { Normal, Neox };

// Multi-axis RoPE (Qwen2-VL family): each rotary pair reads one component of the token's
// (t, h, w) position. sections = pairs per component {t, h, w, extra} (sum = n_rot / 2).
//   Blocked (Qwen2-VL, Qwen2.5-VL; ggml's MROPE): pairs [0, s_t) read t, the next s_h read h, the
//     next s_w read w (the extra section reads t: text decoders leave it 0).
//   Interleaved (Qwen3-VL): pair i reads h when i % 3 == 1 and i < 3 s_h, w when i % 3 == 2 and
//     i < 3 s_w, else t.
// The frequency of pair i is the same as in 1-D RoPE; text tokens (t = h = w) rotate exactly as
// 1-D RoPE, and relocating a chunk by delta adds delta to all three components.
enum class MropeMode : uint8_t { None, Blocked, Interleaved };

// YaRN context extension (rope.scaling.type = yarn, as ggml applies it): pair i's frequency
// moves from the trained one, theta^(-2i/n_rot) (extrapolation), to freq_scale times it
// (interpolation) along a ramp over the pairs. The ramp is 1 up to pair lo and 0 from pair hi on,
// where lo = floor(c(beta_fast)), hi = ceil(c(beta_slow)) clamped to [0, n_rot - 1], and
// c(beta) = n_rot * ln(orig_ctx / (2 pi beta)) / (2 ln theta) is the pair that turns beta times
// over the original context. freq(i) = theta^(-2i/n_rot) * (freq_scale * (1 - r_i) + r_i),
// r_i = ext_factor * ramp(i). Still a rotation by pos * freq(i), so R(a) R(b) = R(a + b) and
// relocation stays exact. The magnitude correction goes to the attention scale, not the rotation
// (model/deepseek2.h).
struct YarnRamp {
  double ext_factor = 0.0;  // 0: off; 1: YaRN
  int orig_ctx = 0;         // context the model was trained with before the extension
  double beta_fast = 32.0, beta_slow = 1.0;
};

struct RopeDesc {
  RopeLayout layout = RopeLayout::Normal;
  int head_dim = 0;
  int n_rot = 0;  // even, <= head_dim
  double theta = 10000.0;
  double freq_scale = 1.0;  // linear position scaling (1 / factor)
  MropeMode mrope = MropeMode::None;
  std::array<int, 4> sections{};  // pairs per component (t, h, w, extra) when mrope != None
  YarnRamp yarn;
  // LongRoPE (phi3): pair i's frequency divided by freq_factors[i] (n_pairs values; empty: none),
  // the set LongRope::for_context chose. Still a rotation by pos * freq(i): relocation is exact.
  std::vector<float> freq_factors;
  // Magnitude of the rotated dims of q and k (rope.scaling.attn_factor; ggml's mscale with
  // ext_factor 0): they are multiplied by it, the dims >= n_rot are not (rope_scale_rotary).
  double attn_factor = 1.0;

  int n_pairs() const { return n_rot / 2; }
  // Radians per position of pair i (ops/rope_yarn.cpp).
  double pair_freq(int pair) const;
  // Which position component (0 = t, 1 = h, 2 = w) pair i reads.
  int component(int pair) const;
};

// LongRoPE's two factor sets (phi3 GGUF: rope_factors_short / rope_factors_long, n_pairs each)
// and the context they were trained around. As llama.cpp chooses: the long factors when the
// context exceeds orig_ctx, else the short ones.
struct LongRope {
  std::vector<float> short_factors, long_factors;
  int orig_ctx = 0;
  bool enabled() const { return !short_factors.empty() || !long_factors.empty(); }
  const std::vector<float>& for_context(int64_t n_ctx) const {
    return n_ctx > orig_ctx ? long_factors : short_factors;
  }
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
  bool one_dimensional() const { return desc_.mrope == MropeMode::None; }
  // Table rows of 1-D position p (n_pairs values each), or false when p is outside the table.
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

// Multiplies the first n_rot dims of each of n_heads heads by d.attn_factor (nothing when it is
// 1); rotation is linear, so scaling before rope_apply is scaling the rotated values.
void rope_scale_rotary(const RopeDesc& d, float* x, int n_heads);

// Scalar reference: evaluates angles itself in double and rotates one token (tests only).
void rope_apply_reference(const RopeDesc& d, int64_t pos, float* x, int n_heads, bool inverse);

// Cos/sin pointers for a token's position: the table rows for 1-D positions in the table, else
// evaluated into `scratch` (2 x n_pairs floats).
inline void rope_angles_for(const RopeCache& rope, Pos p, float* scratch, const float** c,
                            const float** s) {
  if (rope.one_dimensional() && rope.table_rows(p.t, c, s)) return;
  rope.angles(p, scratch, scratch + rope.desc().n_pairs());
  *c = scratch;
  *s = scratch + rope.desc().n_pairs();
}

}  // namespace kamera
