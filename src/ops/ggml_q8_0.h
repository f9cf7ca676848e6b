// Products with Q8_0 weights summed in the order of ggml's x86 CPU backend (Numerics::Ggml,
// ops/numerics.h), so that a Q8_0 file's logits are llama.cpp's.
//
// ggml multiplies a Q8_0 matrix by activation rows quantized to q8_0 (byte for byte as kamera's
// quantizer writes them) through llamafile's tinyBLAS_Q0_AVX at every batch size (ggml-cpu.c
// calls llamafile_sgemm first; Q8_0 is not repacked on x86) or ggml_vec_dot_q8_0_q8_0, which
// round alike: per output, 8 f32 lanes; for each block b in order, lane l gets
//   acc[l] = fma(f32(d_w[b]) * f32(d_a[b]), float(sum of the 4 products of quants 4l .. 4l+3),
//                acc[l])
// and the lanes are added as ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7))
// (hsum_float_8; llamafile's hsum adds in the same order). kamera's own kernels sum a block's 32
// products as one integer or through f32 panels: the same value to within f32 rounding, which an
// f16 tie of a later q8_0 scale can turn into a whole quantization step (docs/MODELS.md).
//
// Weights stay in the file's row layout (not repacked). One kernel serves decode and prefill: per
// weight row, up to 4 activation rows per pass. Correctness over speed: prefill runs at a
// fraction of the default's (docs/MODELS.md has the measurement).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ops/quant.h"

namespace kamera {

class ThreadPool;

namespace ggml_q8_0 {

// The ggml order above for one Q8_0 weight row and one q8_0 activation row of cols values (a
// multiple of 32). Plain loops: the reference the vector kernel is tested against. Products are
// exact integers; ggml's sign trick (|w| times a with w's sign) differs only for a weight quant of
// -128 against an activation quant of -128, which neither ggml's quantizer nor kamera's writes.
float dot_ref(int64_t cols, const void* w, const void* act);

// y[a * y_stride + r] = dot(weight row r, activation row a) for r in [r0, r1), a in [0, n_act):
// weight rows row_bytes apart, q8_0 activation rows act_bytes apart.
using RowsFn = void (*)(int64_t cols, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
                        const uint8_t* act, size_t act_bytes, int n_act, float* y,
                        int64_t y_stride);
void rows_ref(int64_t cols, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
              const uint8_t* act, size_t act_bytes, int n_act, float* y, int64_t y_stride);
// AVX2 + FMA + F16C (ggml_q8_0_avx2.cpp): call only when the CPU has them. Bit for bit rows_ref.
void rows_avx2(int64_t cols, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
               const uint8_t* act, size_t act_bytes, int n_act, float* y, int64_t y_stride);
// rows_avx2 where isa_level() allows it (KAMERA_ISA caps it), else rows_ref.
RowsFn rows_kernel();

// "ggml-order avx2 q8_0-dot, decode and prefill" (or scalar): for `kamera info`.
const char* path_name();

// A product matmul sends here: a Q8_0 weight in the Rows layout marked Numerics::Ggml.
bool applies(const WeightView& w);

// matmul_many for products that all satisfy applies() (x rows quantized to q8_0 once).
void matmul(std::span<const quant::Product> ps, const float* x, int64_t n, ThreadPool& pool);

}  // namespace ggml_q8_0
}  // namespace kamera
