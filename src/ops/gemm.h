// Dense f32 products through OpenBLAS, on the kernels that match the CPU (ops/blas_select.h).
#pragma once

#include <string>

namespace kamera {

enum class Trans : bool { No = false, Yes = true };

// C[M x N] = alpha * op(A)[M x K] * op(B)[K x N] + beta * C, all row-major; op(X) = X^T when
// Trans::Yes (then A is stored K x M, B is N x K). lda, ldb, ldc: row strides as stored.
// beta == 0 ignores C's old contents (NaN included). M == 1 or N == 1 runs as a matrix-vector
// product (OpenBLAS's sgemm is 3-5x slower than its sgemv there). Exact f32 arithmetic: no
// reduced-precision path, so relocation and full-rank patches stay exact to f32 rounding.
void gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc);

// Y[T x out] = X[T x in] * W[out x in]^T, plus bias[out] when given (row-major; W as stored by
// llama2.c and GGUF: out rows of in values). T == 1 goes through sgemv.
void matmul_wt(const float* x, const float* w, const float* bias, float* y, int T, int in, int out);

// Threads OpenBLAS uses for one call (process-wide setting).
void set_blas_threads(int n);
int blas_threads();

// While alive, every OpenBLAS call runs on its caller's thread alone, so kamera's pool can run
// products side by side. OpenBLAS's own threads are then never handed work: after a call they
// would spin (sched_yield) for about 0.1 s and take a core from the pool's kernels (on the 2-core
// AMD host, F16 prefill went from 232 to 305 tok/s without that spinning). Restores the previous
// count when it ends.
class BlasOnCallingThread {
 public:
  BlasOnCallingThread();
  ~BlasOnCallingThread();
  BlasOnCallingThread(const BlasOnCallingThread&) = delete;
  BlasOnCallingThread& operator=(const BlasOnCallingThread&) = delete;

 private:
  int saved_;
};

// The library and kernels in use, e.g. "OpenBLAS 0.3.21 SkylakeX (avx512 kernels; ...)".
std::string blas_path();

}  // namespace kamera
