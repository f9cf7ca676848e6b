// ggml's CPU product of a Q8_0 matrix and f32 activation rows (README.md). Not built by CMake:
// make.sh compiles it against a llama.cpp build's libggml.
//
//   ref_q8_0 OUT.f32
//
// OUT gets ggml_mul_mat(W, x) computed by the CPU backend on one thread, little-endian f32: first
// x = activation row 0 alone (kRows values), then x = rows 0 .. kActRows - 1 in one batch
// (kActRows x kRows values, row by row). W and x are ref_values.h's.
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "ggml-cpu.h"
#include "ggml.h"
#include "ref_values.h"

using namespace ggml_numerics_fixture;

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  FILE* f = std::fopen(argv[1], "wb");
  if (f == nullptr) return 1;
  for (int n : {1, kActRows}) {
    ggml_init_params p = {size_t(16) << 20, nullptr, false};
    ggml_context* ctx = ggml_init(p);
    ggml_tensor* w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, kCols, kRows);
    auto* blocks = static_cast<BlockQ8_0*>(w->data);
    for (int r = 0; r < kRows; ++r)
      for (int b = 0; b < kCols / 32; ++b) {
        BlockQ8_0& blk = blocks[r * (kCols / 32) + b];
        blk.d = weight_scale_bits(r, b);
        for (int j = 0; j < 32; ++j) blk.qs[j] = weight_quant(r, b, j);
      }
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kCols, n);
    auto* xd = static_cast<float*>(x->data);
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < kCols; ++k) xd[i * kCols + k] = act_value(i, k);
    ggml_tensor* y = ggml_mul_mat(ctx, w, x);
    ggml_cgraph* gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    if (ggml_graph_compute_with_ctx(ctx, gf, 1) != GGML_STATUS_SUCCESS) return 1;
    std::fwrite(y->data, 4, size_t(kRows) * size_t(n), f);
    ggml_free(ctx);
  }
  std::fclose(f);
  return 0;
}
