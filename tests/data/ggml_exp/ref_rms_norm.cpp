// ggml's CPU RMS norm of fixed rows (README.md). Not built by CMake: make.sh compiles it against
// a llama.cpp build's libggml.
//
//   ref_rms_norm OUT.f32
//
// OUT gets, for each dim of kDims in order, kRows rows of ggml_rms_norm(x, 1e-6) computed by the
// CPU backend on one thread (little-endian f32) of the rows row_value below.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"

constexpr int kDims[] = {7, 32, 64, 896, 4096};
constexpr int kRows = 5;

// A full 24-bit mantissa (so the squares round), exact in f32; the test builds the same values.
float row_value(int r, int i) {
  const uint32_t m = 0x800000u | ((uint32_t(i) * 2654435761u + uint32_t(r) * 40503u) & 0x7fffffu);
  const float v = std::ldexp(float(m), r % 5 - 25);
  return (7 * i + r) % 3 == 0 ? -v : v;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  FILE* f = std::fopen(argv[1], "wb");
  if (f == nullptr) return 1;
  for (int dim : kDims) {
    ggml_init_params p = {size_t(64) << 20, nullptr, false};
    ggml_context* ctx = ggml_init(p);
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, dim, kRows);
    auto* xd = static_cast<float*>(x->data);
    for (int r = 0; r < kRows; ++r)
      for (int i = 0; i < dim; ++i) xd[r * dim + i] = row_value(r, i);
    ggml_tensor* y = ggml_rms_norm(ctx, x, 1e-6f);
    ggml_cgraph* gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    if (ggml_graph_compute_with_ctx(ctx, gf, 1) != GGML_STATUS_SUCCESS) return 1;
    std::fwrite(y->data, 4, size_t(dim) * kRows, f);
    ggml_free(ctx);
  }
  std::fclose(f);
  return 0;
}
