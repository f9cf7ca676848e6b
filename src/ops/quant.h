// Weights used in their file's type (F32, F16, BF16, Q4_0 ... Q8_0, Q2_K ... Q6_K, IQ4_NL,
// IQ4_XS): the entry points the forward pass calls, with the kernel path picked at run time from
// the CPU's features (core/cpu_features.h; KAMERA_ISA caps it).
//
// Decode (few activation rows) and prefill (many) quantize each row once to the weight type's
// 8-bit dot type, as ggml's CPU backend does at every batch size. Decode runs integer dots over
// the weight rows; prefill too over repacked weights, else the rows expanded back to f32 times
// dequantized f32 panels in a blocked GEMM (quant.cpp; F16/BF16: bf16 panels where faster; avx2:
// the file's rows widened as packed). F32 works too; the forward keeps it on matmul_wt, ops/gemm.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/ggml_type.h"
#include "core/status.h"
#include "ops/numerics.h"

namespace kamera {

class ThreadPool;

// How a view's bytes are ordered: the file's rows, or rows repacked in groups of 16 for the VNNI
// decode kernels (ops/quant_repack.h; the same bytes per row, another order).
enum class WeightLayout : uint8_t {
  Rows,
  Q8_0x16,
  Q5_0x16,
  Q4_Kx16,
  Q6_Kx16,
  Q4_0x16,
  IQ4_XSx16,
  IQ4_NLx16,
  Q5_Kx16,
  Q5_1x16
};

// A weight matrix of `rows` (out) rows of `cols` (in) values in ggml type `type`, row-major,
// e.g. a GGUF tensor's mapped bytes (ne[0] = cols). Not owning.
struct WeightView {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
  WeightLayout layout = WeightLayout::Rows;
  // Ggml: a Q8_0 matrix in the Rows layout multiplies through ops/ggml_q8_0.h (ggml's lane
  // order) in matmul and matmul_many; other types ignore it.
  Numerics numerics = Numerics::Kamera;
  // Row r's bytes (Rows layout only: a repacked view's rows are unpacked by quant_repack.h).
  const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes; }
};

// Checks the type is a weight type and cols a whole number of its blocks.
Result<WeightView> make_weight_view(GgmlType type, const void* data, int64_t rows, int64_t cols);

// y[n x rows] = x[n x cols] * W^T (+ bias[rows] when given). x and y row-major, not aliased.
void matmul(const WeightView& w, const float* x, int64_t n, const float* bias, float* y,
            ThreadPool& pool);

namespace quant {
struct Product;
}
// Several products of the same rows x (every W has x's cols): in decode, x is quantized once per
// dot type and all the products run in one parallel pass (one barrier, not one per product).
void matmul_many(std::span<const quant::Product> products, const float* x, int64_t n,
                 ThreadPool& pool);

// out[count x cols] = rows [first, first + count) of W in f32 (embedding lookups).
void dequantize_rows(const WeightView& w, int64_t first, int64_t count, float* out);

// "decode avx512_vnni q8_0-dot, prefill avx512_bf16 bf16-gemm": the paths matmul takes for a
// weight type on this CPU (for `kamera info` and bench --json).
std::string kernel_path(GgmlType t);

// Activation rows up to which matmul takes the decode path (each extra row costs a whole pass of
// integer dots; from about 5 rows on, dequantized panels through the GEMM are faster here).
inline constexpr int64_t kQuantDecodeMaxRows = 4;

namespace quant {
struct QuantKernels;
// One product of matmul_many: y = x W^T (+ bias).
struct Product {
  const WeightView* w;
  const float* bias;  // null: none
  float* y;
};
// matmul through the given kernel tables (tests and benchmarks compare paths with it).
void matmul_with(const QuantKernels& decode, const QuantKernels& prefill, const WeightView& w,
                 const float* x, int64_t n, const float* bias, float* y, ThreadPool& pool);
void matmul_many_with(const QuantKernels& decode, const QuantKernels& prefill,
                      std::span<const Product> products, const float* x, int64_t n,
                      ThreadPool& pool);
const QuantKernels& decode_kernels();  // the tables matmul uses on this CPU
const QuantKernels& prefill_kernels();
// The decode table for weights of type t: decode_kernels(), except BF16 weights on CPUs with
// AVX512-BF16, which take its vdpbf16ps rows (activations rounded to bf16).
const QuantKernels& decode_kernels(GgmlType t);
// The prefill table for weights of type t: prefill_kernels(), except BF16 weights on CPUs with
// AVX512-BF16, which take its bf16 tiles (their panels are then exact).
const QuantKernels& prefill_kernels(GgmlType t);
}  // namespace quant

}  // namespace kamera
