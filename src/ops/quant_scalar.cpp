// The baseline x86-64 path of the quantized weight kernels: the scalar references for decode and
// dequantization, OpenBLAS sgemm over dequantized f32 panels for prefill.
#include <cblas.h>

#include "ops/quant_kernels.h"
#include "ops/quant_ref.h"

namespace kamera::quant {

namespace {

void vec_dot_rows(GgmlType t, int64_t cols, const uint8_t* w, size_t row_bytes, int64_t r0,
                  int64_t r1, const uint8_t* act, size_t act_bytes, int n_act, float* y,
                  int64_t y_stride) {
  for (int64_t r = r0; r < r1; ++r)
    for (int a = 0; a < n_act; ++a)
      y[a * y_stride + r] =
          vec_dot_ref(t, cols, w + size_t(r) * row_bytes, act + size_t(a) * act_bytes);
}

void gemm(int64_t m, int64_t nw, int64_t k, const void* x, const void* w, int64_t ldw, float* y,
          int64_t ldy) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(nw), int(k), 1.0f,
              static_cast<const float*>(x), int(k), static_cast<const float*>(w), int(ldw), 0.0f, y,
              int(ldy));
}

}  // namespace

const QuantKernels& scalar_kernels() {
  static const QuantKernels k = {
      .name = "scalar",
      .level = IsaLevel::Scalar,
      .needs_bf16 = false,
      .dequantize = dequantize_row_ref,
      .vec_dot_rows = vec_dot_rows,
      .panel = PanelFormat::F32,
      .to_panel = nullptr,
      .packed_x_bytes = nullptr,
      .pack_x = nullptr,
      .gemm = gemm,
      .has_x16 = nullptr,
      .vec_dot_x16 = nullptr,
  };
  return k;
}

}  // namespace kamera::quant
