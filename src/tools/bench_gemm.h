// kamera bench gemm: the engine's f32 GEMM shapes through ops/gemm.h on every OpenBLAS kernel
// table this CPU can run (interleaved A/B in one process), so the gain of the kernel selection
// (ops/blas_select.h) is a ratio measured in one run.
#pragma once

#include <string>

namespace kamera::cli {

struct GemmBenchArgs {
  std::string model;  // shapes from this model; empty: Qwen2.5-0.5B's (the 0.5b preset)
  int tokens = 512;   // prefill rows (M), attention keys, patch rows
  int reps = 5;
  int threads = 1;
  bool json = false;
};

int run_bench_gemm(const GemmBenchArgs& a);

}  // namespace kamera::cli
