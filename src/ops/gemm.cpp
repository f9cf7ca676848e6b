#include "ops/gemm.h"

#include <cblas.h>

extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

namespace kamera {

void matmul_wt(const float* x, const float* w, const float* bias, float* y, int T, int in,
               int out) {
  if (T == 1) {
    for (int o = 0; o < out; ++o) y[o] = bias ? bias[o] : 0.0f;  // beta = 1: no NaN from junk
    cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, w, in, x, 1, 1.0f, y, 1);
    return;
  }
  if (bias) {
    for (int t = 0; t < T; ++t)
      for (int o = 0; o < out; ++o) y[size_t(t) * out + o] = bias[o];
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, out, in, 1.0f, x, in, w, in,
              bias ? 1.0f : 0.0f, y, out);
}

void set_blas_threads(int n) {
  openblas_set_num_threads(n);
}
int blas_threads() {
  return openblas_get_num_threads();
}

}  // namespace kamera
