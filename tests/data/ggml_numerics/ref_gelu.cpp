// ggml's CPU GEGLU (README.md). Not built by CMake: make.sh compiles it against a llama.cpp
// build's libggml.
//
//   ref_gelu OUT_TABLE.f16 OUT_SWEEP.f32
//
// OUT_TABLE gets ggml_geglu_split(x, 1) for x = every f16 value (bits 0 .. 65535 in order), as
// little-endian f16 (each result is an f16 value: the table's entry, x itself, or 0); OUT_SWEEP
// gets ggml_geglu_split(x, g) for ref_values.h's kGeluSweep pairs gelu_x(i), gelu_g(i), as f32.
#include <cstdio>

#include "ggml-cpu.h"
#include "ggml.h"
#include "ref_values.h"

using namespace ggml_numerics_fixture;

// ggml_geglu_split(x, g) of n values on the CPU backend, one thread, into out.
static bool geglu(const float* xs, const float* gs, int n, float* out) {
  ggml_init_params p = {size_t(8) << 20, nullptr, false};
  ggml_context* ctx = ggml_init(p);
  ggml_tensor* x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
  ggml_tensor* g = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
  for (int i = 0; i < n; ++i) {
    static_cast<float*>(x->data)[i] = xs[i];
    static_cast<float*>(g->data)[i] = gs[i];
  }
  ggml_tensor* y = ggml_geglu_split(ctx, x, g);
  ggml_cgraph* gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(gf, y);
  const bool ok = ggml_graph_compute_with_ctx(ctx, gf, 1) == GGML_STATUS_SUCCESS;
  for (int i = 0; ok && i < n; ++i) out[i] = static_cast<float*>(y->data)[i];
  ggml_free(ctx);
  return ok;
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  static float xs[65536], gs[65536], ys[65536];
  for (int h = 0; h < 65536; ++h) {
    xs[h] = ggml_fp16_to_fp32(ggml_fp16_t(h));
    gs[h] = 1.0f;
  }
  if (!geglu(xs, gs, 65536, ys)) return 1;
  FILE* t = std::fopen(argv[1], "wb");
  if (t == nullptr) return 1;
  for (int h = 0; h < 65536; ++h) {
    const ggml_fp16_t v = ggml_fp32_to_fp16(ys[h]);
    std::fwrite(&v, 2, 1, t);
  }
  std::fclose(t);
  for (int i = 0; i < kGeluSweep; ++i) {
    xs[i] = gelu_x(i);
    gs[i] = gelu_g(i);
  }
  if (!geglu(xs, gs, kGeluSweep, ys)) return 1;
  FILE* s = std::fopen(argv[2], "wb");
  if (s == nullptr) return 1;
  std::fwrite(ys, 4, kGeluSweep, s);
  std::fclose(s);
  return 0;
}
