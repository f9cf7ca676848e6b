// One weight matrix of a model in its file's type (F32, F16, BF16, the legacy quants, the
// k-quants, IQ4): rows (out) x cols (in), row-major, as GGUF and PyTorch hold a Linear. The bytes
// live in the mapped model file (the Model keeps the mapping alive), or in one copy the Weight
// owns (llama2.c checkpoints, weights built in memory, a file whose alignment is too small for
// the type). A Weight is never widened to f32 as a whole on the forward path: products go through
// linear(), embedding rows are dequantized when they are looked up.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "core/ggml_type.h"
#include "core/status.h"
#include "ops/quant.h"

namespace kamera {

class ThreadPool;

class Weight {
 public:
  Weight() = default;
  // Owned f32 values, rows x cols (values.size() == rows * cols).
  static Weight from_f32(std::vector<float> values, int64_t rows, int64_t cols);
  // Bytes the caller keeps alive (a mapped file). Copied into owned, aligned storage when
  // `data` is not aligned to 4 bytes, so kernels may read f32 and f16 scales directly.
  static Result<Weight> borrow(GgmlType type, const void* data, int64_t rows, int64_t cols);
  // An owned copy of the same values in the same type.
  static Weight copy_of(const WeightView& v);
  // The same values in `layout` (ops/quant_repack.h; Rows: the same bytes), in owned memory
  // (huge pages for large matrices). A borrowed source's mapped
  // pages are released as they are consumed (read again, they fault back in from the file), so
  // the copy replaces them instead of doubling the resident set.
  static Weight repacked(const Weight& src, WeightLayout layout);
  // Bytes repacked(src, layout) holds.
  static size_t repacked_bytes(const Weight& src, WeightLayout layout);
  // Owned, uninitialised bytes for repacked_into: 64-byte aligned; a large block on 2 MiB
  // boundaries with huge pages asked for (the decode kernels stream it: fewer TLB misses, and the
  // hardware prefetchers do not stop at every 4 KiB page edge).
  static std::shared_ptr<void> block(size_t bytes);
  // repacked(), written at `at` inside `block` (repacked_bytes(src, layout) bytes from there),
  // which the Weight then shares: the loader puts every matrix into one block, so the per-layer
  // matrices (a few MiB each) sit on huge pages too.
  static Weight repacked_into(const Weight& src, WeightLayout layout,
                              const std::shared_ptr<void>& block, uint8_t* at);

  bool empty() const { return view_.data == nullptr || view_.rows == 0; }
  GgmlType type() const { return view_.type; }
  int64_t rows() const { return view_.rows; }
  int64_t cols() const { return view_.cols; }
  size_t bytes() const { return size_t(view_.rows) * view_.row_bytes; }
  bool owned() const { return storage_ != nullptr; }
  WeightLayout layout() const { return view_.layout; }
  const WeightView& view() const { return view_; }
  const uint8_t* raw() const { return view_.data; }
  // Marks the view with n (ops/numerics.h: Ggml sends a Q8_0 matrix in the file's layout through
  // ggml's lane order).
  void set_numerics(Numerics n) { view_.numerics = n; }

  bool is_f32() const { return view_.type == GgmlType::F32; }
  // The f32 values (only for F32 weights).
  const float* f32() const;
  // out[count x cols] = rows [first, first + count) in f32 (embedding lookups).
  void rows_f32(int64_t first, int64_t count, float* out) const;
  // Every value in f32 (tests, the trainer's import, reference forwards; never the engine).
  std::vector<float> to_f32() const;
  // Same type, shape and bytes.
  bool same_as(const Weight& o) const;

 private:
  WeightView view_;
  std::shared_ptr<const void> storage_;  // owns the bytes when set (shared by copies)
};

// y[n x w.rows] = x[n x w.cols] * W^T (+ bias[w.rows] when given). F32 weights go through
// OpenBLAS (ops/gemm.h, exact f32), every other type through ops/quant.h's kernels in that type.
void linear(const Weight& w, const float* x, int n, const float* bias, float* y, ThreadPool& pool);

// One product of linear_many.
struct LinearOut {
  const Weight* w;
  const float* bias;  // null: none
  float* y;
};
// linear() for several weights on the same rows x: the quantized ones run together (matmul_many:
// x quantized once, one parallel pass in decode).
void linear_many(std::initializer_list<LinearOut> outs, const float* x, int n, ThreadPool& pool);

}  // namespace kamera
