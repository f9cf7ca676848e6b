// Scalar references of the quantized weight types: dequantization, the activation quantizers of
// the integer dot products, and the dot products themselves. Plain loops written for clarity;
// they are the oracle every fast path (ops/quant_*.cpp) is tested against, so they stay.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/ggml_type.h"

namespace kamera::quant {

// dst[0..n) = the n values of a row of weight type t (n a whole number of blocks).
void dequantize_row_ref(GgmlType t, const void* src, float* dst, int64_t n);

// Quantizes n activations to dot type dt exactly as ggml's CPU backend does: Q8_0 or Q8_1 (n a
// multiple of 32: per block d = max|x| / 127, q = x * (127 / max|x|) rounded half to even) or
// Q8_K (n a multiple of 256: q = x * (-127 / m) for m the signed value of the first largest |x|,
// f32 d = m / -127 as 1 / (-127 / m), plus the sums of 16); F32 copies.
void quantize_act_ref(GgmlType dt, const float* x, void* dst, int64_t n);

// Quantizes n weights (a multiple of 32) to mxfp4 blocks, as llama.cpp's converter writes them:
// per block the E8M0 exponent e = floor(log2 max|x|) - 2 + 127 (clamped to [0, 254]; 0 for an
// all-zero block), so the largest |x| falls in [4, 8) units of 2^(e - 127), and each value the
// nearest of the 16 E2M1 levels times that scale (beyond 6 units: 6). Values already on the grid
// of their block come back exactly.
void quantize_mxfp4_ref(const float* x, void* dst, int64_t n);

// Bytes of a row of n activations quantized for weight type t (in its dot type).
size_t act_row_bytes(GgmlType t, int64_t n);

// Dot product of a row of n values of weight type t with a row of activations quantized to
// dot_type_of(t) (raw f32 for the float types). Integer sums per block, f32 scales.
float vec_dot_ref(GgmlType t, int64_t n, const void* w, const void* act);

}  // namespace kamera::quant
