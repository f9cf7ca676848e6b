// kamera window-bench --scenario estimate: cheap Δ estimators against the true KL
// (bench/estimate_bench.h), on a text model's reuse items or on the mini-VL's clips (--mmproj).
#pragma once

#include <string>

namespace kamera::cli {

struct EstimateArgs {
  std::string model, tokenizer, items, mmproj;
  int rank = 8, antecedents = 3, limit = 12, threads = 1;
  double kl_threshold = 1e-3;
  uint64_t seed = 1;
  bool json = false, quiet = false;
};

int run_estimate_scenario(const EstimateArgs& a);

}  // namespace kamera::cli
