// Decode's driver over weights in their file's rows (the float and BF16 dots of quant_x86.inc and
// quant_avx512_bf16.cpp): rows [r0, r1) against n_act activation rows, kRowsPerPass weight rows
// by up to 4 activation rows per pass. The weights stream once: while a pass runs, the rows
// kAheadBytes further on are requested as a burst (the hardware prefetchers stop at 4 KiB page
// edges).
//
// Measured on the 2-core AMD host (0.5b BF16 file, tg64, 3 interleaved rounds): 4 rows per pass
// with the burst beat 1 row per pass and prefetches spread over the loads (46.7 / 43.2 / 36.3
// tok/s against at most 43.0 / 35.4 / 35.1).
//
// Everything here is a template over the caller's tile, so each ISA's translation unit gets its
// own copies (no inline function compiled for AVX-512 can be picked for another ISA's caller).
#pragma once

#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kamera::quant {

// f(std::integral_constant<int, n>) for n in 1..4 (4 for anything larger).
template <class F>
inline void with_1_to_4(int n, const F& f) {
  switch (n) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    default:
      return f(std::integral_constant<int, 4>{});
  }
}

// tile(na, nr, w, act, y): the products of nr weight rows from w against na activation rows from
// act, row a's into y + a * y_stride (na, nr: std::integral_constant<int, 1..4>).
// EXPERIMENT knobs (KAMERA_PASS_AHEAD, KAMERA_PASS_HINT, KAMERA_PASS_FROM_END), quant.cpp.
struct PassPrefetch {
  int64_t ahead;  // bytes past the pass's first byte (or its end, from_end) where the burst starts
  int hint;       // 0 T0, 1 T1, 2 T2, 3 NTA, 4 none
  bool from_end;
};
const PassPrefetch& pass_prefetch();

template <class Tile>
inline void rows_in_passes(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
                           const uint8_t* act, size_t act_bytes, int n_act, float* y,
                           int64_t y_stride, const Tile& tile) {
  constexpr int kRowsPerPass = 4;
  const PassPrefetch pp = pass_prefetch();
  const uint8_t* end = w + size_t(r1) * row_bytes;
  for (int64_t r = r0; r < r1; r += kRowsPerPass) {
    const int nr = int(r1 - r < kRowsPerPass ? r1 - r : kRowsPerPass);
    const uint8_t* wr = w + size_t(r) * row_bytes;
    const uint8_t* pf = wr + pp.ahead + (pp.from_end ? int64_t(nr) * int64_t(row_bytes) : 0);
    const uint8_t* pf_end = pf + size_t(nr) * row_bytes < end ? pf + size_t(nr) * row_bytes : end;
    switch (pp.hint) {
      case 0:
        for (; pf < pf_end; pf += 64) _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T0);
        break;
      case 1:
        for (; pf < pf_end; pf += 64) _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T1);
        break;
      case 2:
        for (; pf < pf_end; pf += 64) _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T2);
        break;
      case 3:
        for (; pf < pf_end; pf += 64) _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_NTA);
        break;
      default:
        break;
    }
    for (int a = 0; a < n_act; a += 4) {
      const uint8_t* xa = act + size_t(a) * act_bytes;
      float* ya = y + a * y_stride + r;
      with_1_to_4(n_act - a,
                  [&](auto na) { with_1_to_4(nr, [&](auto nrc) { tile(na, nrc, wr, xa, ya); }); });
    }
  }
}

}  // namespace kamera::quant
