// kamera bench serve: a cached chunk of `tokens` behind an antecedent of `antecedent` random
// tokens, on the model's real shapes: serving it (canonical KV + a rank-`rank` patch written
// into the pool, no forward) against re-prefilling it, against the memcpy + patch-GEMM floor of
// the same bytes, and the patch's compile cost (conditioned forward + factorization) against
// that forward alone; medians of `reps` repetitions after one warm-up.
#pragma once

#include <cstdint>
#include <string>

namespace kamera::cli {

struct ServeBenchArgs {
  std::string model;
  int tokens = 512, antecedent = 256, rank = 32, reps = 5, threads = 1;
  std::string svd = "auto";  // auto | gesdd | randomized
  uint64_t seed = 1;
  bool json = false;
};

int run_bench_serve(const ServeBenchArgs& a);

}  // namespace kamera::cli
