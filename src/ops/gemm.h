// Dense products through OpenBLAS.
#pragma once

namespace kamera {

// Y[T x out] = X[T x in] * W[out x in]^T, plus bias[out] when given (row-major; W as stored by
// llama2.c and GGUF: out rows of in values). T == 1 goes through sgemv.
void matmul_wt(const float* x, const float* w, const float* bias, float* y, int T, int in, int out);

// Threads OpenBLAS uses for one call (process-wide setting).
void set_blas_threads(int n);
int blas_threads();

}  // namespace kamera
