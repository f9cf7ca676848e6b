// ggml's CPU e^x and SwiGLU on a fixed sweep of inputs (README.md). Not built by CMake: make.sh
// compiles it against a llama.cpp build's libggml-cpu.
//
//   ref_exp OUT.f32
//
// OUT gets 2 x 4096 little-endian f32: e^x from ggml_vec_soft_max_f32(16, y, x, 0) (it writes
// y = e^(x - 0) before normalizing) for x = -105 + 194 i / 4096, then ggml_vec_swiglu_f32's
// silu(x) * g for the sweep below.
#include <cmath>
#include <cstdio>
#include <vector>

extern "C" double ggml_vec_soft_max_f32(int n, float* y, const float* x, float max);
extern "C" void ggml_vec_swiglu_f32(int n, float* y, const float* x, const float* g);

// The SwiGLU sweep (the test builds the same): |x| = 2^(i / 128 % 16 - 9) (1 + (i % 128) / 128),
// from 2^-9 to 2^7, positive for i < 2048 and negative above; g = 1, every third value -0.75.
static void sweep(std::vector<float>& x, std::vector<float>& g) {
  for (int i = 0; i < 4096; ++i) {
    const float m = std::ldexp(1.0f + float(i % 128) / 128.0f, i / 128 % 16 - 9);
    x[size_t(i)] = i / 2048 == 0 ? m : -m;
    g[size_t(i)] = i % 3 == 0 ? -0.75f : 1.0f;
  }
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::vector<float> x(4096), g(4096), e(4096), s(4096);
  sweep(x, g);
  for (int i = 0; i < 4096; i += 16) {
    float v[16];
    for (int j = 0; j < 16; ++j) v[j] = -105.0f + 194.0f * float(i + j) / 4096.0f;
    ggml_vec_soft_max_f32(16, e.data() + i, v, 0.0f);
  }
  ggml_vec_swiglu_f32(4096, s.data(), x.data(), g.data());
  FILE* f = std::fopen(argv[1], "wb");
  if (f == nullptr) return 1;
  std::fwrite(e.data(), 4, e.size(), f);
  std::fwrite(s.data(), 4, s.size(), f);
  std::fclose(f);
  return 0;
}
