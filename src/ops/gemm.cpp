#include "ops/gemm.h"

#include <cblas.h>

#include <algorithm>

#include "ops/blas_select.h"

namespace kamera {

namespace {

// Selected when kamera is loaded, so the products that still call cblas or LAPACK directly
// (attention, patches, SVD) run on the right kernels too; every entry point below checks again.
[[maybe_unused]] const bool kernels_selected_at_load = (ensure_blas_kernels(), true);

// C = beta * C over M x N (BLAS leaves C untouched when K == 0 in the matrix-vector routes).
void scale(float* C, int M, int N, int ldc, float beta) {
  for (int i = 0; i < M; ++i) {
    float* row = C + size_t(i) * ldc;
    if (beta == 0.0f) {
      std::fill(row, row + N, 0.0f);
    } else {
      for (int j = 0; j < N; ++j) row[j] *= beta;
    }
  }
}

CBLAS_TRANSPOSE op(bool t) {
  return t ? CblasTrans : CblasNoTrans;
}

}  // namespace

void gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
  ensure_blas_kernels();
  if (M <= 0 || N <= 0) return;
  const bool at = ta == Trans::Yes, bt = tb == Trans::Yes;
  if (K <= 0 || ((M == 1 || N == 1) && beta == 0.0f)) scale(C, M, N, ldc, beta);
  if (K <= 0) return;
  if (M == 1) {  // c[N] = op(B)^T a, a = row 0 of op(A) (a column of A when transposed)
    const int inc_a = at ? lda : 1;
    if (bt) {  // B: N x K
      cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, alpha, B, ldb, A, inc_a, beta, C, 1);
    } else {  // B: K x N
      cblas_sgemv(CblasRowMajor, CblasTrans, K, N, alpha, B, ldb, A, inc_a, beta, C, 1);
    }
    return;
  }
  if (N == 1) {  // c[M] (stride ldc) = op(A) b, b = column 0 of op(B)
    const int inc_b = bt ? 1 : ldb;
    cblas_sgemv(CblasRowMajor, op(at), at ? K : M, at ? M : K, alpha, A, lda, B, inc_b, beta, C,
                ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, op(at), op(bt), M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void matmul_wt(const float* x, const float* w, const float* bias, float* y, int T, int in,
               int out) {
  if (bias) {
    for (int t = 0; t < T; ++t) std::copy(bias, bias + out, y + size_t(t) * out);
  }
  gemm(Trans::No, Trans::Yes, T, out, in, 1.0f, x, in, w, in, bias ? 1.0f : 0.0f, y, out);
}

void set_blas_threads(int n) {
  ensure_blas_kernels();
  openblas_set_num_threads(n);
}
int blas_threads() {
  return openblas_get_num_threads();
}

BlasOnCallingThread::BlasOnCallingThread() : saved_(blas_threads()) {
  if (saved_ != 1) set_blas_threads(1);
}
BlasOnCallingThread::~BlasOnCallingThread() {
  if (saved_ != 1) set_blas_threads(saved_);
}

std::string blas_path() {
  const BlasInfo i = blas_info();
  std::string version = i.config.substr(0, i.config.find(' ', i.config.find(' ') + 1));
  return fmt::format("{} {} ({} kernels; OpenBLAS chose {}; {})", version, i.core,
                     isa_level_name(i.core_level), i.loaded_core, i.decision);
}

}  // namespace kamera
