#include "ops/rope.h"

#include <cmath>

#include "core/status.h"

namespace kamera {

RopeCache::RopeCache(const RopeDesc& desc, int max_pos) : desc_(desc), max_pos_(max_pos) {
  KAMERA_ASSERT(desc.n_rot % 2 == 0 && desc.n_rot <= desc.head_dim && max_pos >= 0);
  const int half = desc.n_pairs();
  inv_freq_.resize(half);
  for (int i = 0; i < half; ++i) inv_freq_[i] = desc.pair_freq(i);
  cos_.resize(size_t(max_pos) * half);
  sin_.resize(size_t(max_pos) * half);
  for (int p = 0; p < max_pos; ++p)
    for (int i = 0; i < half; ++i) {
      const double a = double(p) * inv_freq_[i];
      cos_[size_t(p) * half + i] = float(std::cos(a));
      sin_[size_t(p) * half + i] = float(std::sin(a));
    }
}

void RopeCache::angles_1d(int64_t p, float* c, float* s) const {
  const int half = desc_.n_pairs();
  if (p >= 0 && p < max_pos_) {
    for (int i = 0; i < half; ++i) {
      c[i] = cos_[size_t(p) * half + i];
      s[i] = sin_[size_t(p) * half + i];
    }
    return;
  }
  for (int i = 0; i < half; ++i) {
    const double a = double(p) * inv_freq_[i];
    c[i] = float(std::cos(a));
    s[i] = float(std::sin(a));
  }
}

int RopeDesc::component(int pair) const {
  switch (mrope) {
    case MropeMode::None:
      return 0;
    case MropeMode::Blocked: {
      const int total = sections[0] + sections[1] + sections[2] + sections[3];
      const int sector = total > 0 ? pair % total : 0;
      if (sector < sections[0]) return 0;
      if (sector < sections[0] + sections[1]) return 1;
      if (sector < sections[0] + sections[1] + sections[2]) return 2;
      return 0;
    }
    case MropeMode::Interleaved:
      if (pair % 3 == 1 && pair < 3 * sections[1]) return 1;
      if (pair % 3 == 2 && pair < 3 * sections[2]) return 2;
      return 0;
  }
  return 0;
}

void RopeCache::angles(Pos p, float* c, float* s) const {
  if (desc_.mrope == MropeMode::None) {
    angles_1d(p.t, c, s);
    return;
  }
  const int half = desc_.n_pairs();
  const int32_t comp[3] = {p.t, p.h, p.w};
  for (int i = 0; i < half; ++i) {
    const int64_t q = comp[desc_.component(i)];
    if (q >= 0 && q < max_pos_) {
      c[i] = cos_[size_t(q) * half + i];
      s[i] = sin_[size_t(q) * half + i];
    } else {
      const double a = double(q) * inv_freq_[i];
      c[i] = float(std::cos(a));
      s[i] = float(std::sin(a));
    }
  }
}

namespace {
// Cloned under a name of its own: see ops/clones.h.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void rope_apply_body(
    const RopeDesc& d, const float* c, const float* s, float* x, int n_heads, bool inverse) {
  const int half = d.n_pairs();
  const float sign = inverse ? -1.0f : 1.0f;
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + size_t(h) * d.head_dim;
    if (d.layout == RopeLayout::Normal) {
      for (int i = 0; i < half; ++i) {
        const float x0 = xh[2 * i], x1 = xh[2 * i + 1];
        const float si = sign * s[i];
        xh[2 * i] = x0 * c[i] - x1 * si;
        xh[2 * i + 1] = x0 * si + x1 * c[i];
      }
    } else {
      for (int i = 0; i < half; ++i) {
        const float x0 = xh[i], x1 = xh[i + half];
        const float si = sign * s[i];
        xh[i] = x0 * c[i] - x1 * si;
        xh[i + half] = x0 * si + x1 * c[i];
      }
    }
  }
}
}  // namespace

void rope_apply(const RopeDesc& d, const float* c, const float* s, float* x, int n_heads,
                bool inverse) {
  rope_apply_body(d, c, s, x, n_heads, inverse);
}

void rope_scale_rotary(const RopeDesc& d, float* x, int n_heads) {
  if (d.attn_factor == 1.0) return;
  const float m = float(d.attn_factor);
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < d.n_rot; ++i) x[size_t(h) * d.head_dim + i] *= m;
}

void rope_apply_reference(const RopeDesc& d, int64_t pos, float* x, int n_heads, bool inverse) {
  const int half = d.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < half; ++i) {
      const double freq = d.pair_freq(i);
      const double a = double(pos) * freq * (inverse ? -1.0 : 1.0);
      const float c = float(std::cos(a)), s = float(std::sin(a));
      const int i0 = d.layout == RopeLayout::Normal ? 2 * i : i;
      const int i1 = d.layout == RopeLayout::Normal ? 2 * i + 1 : i + half;
      float* xh = x + size_t(h) * d.head_dim;
      const float x0 = xh[i0], x1 = xh[i1];
      xh[i0] = x0 * c - x1 * s;
      xh[i1] = x0 * s + x1 * c;
    }
  }
}

}  // namespace kamera
