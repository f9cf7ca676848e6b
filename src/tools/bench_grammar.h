// kamera bench grammar: the cost of constrained decoding next to the decode step it rides on.
// A generation under a JSON Schema (or any JSON object) on the model's real shapes and
// vocabulary: each step times the forward of one token and, apart, the constraint's work (mask
// the logits, accept the sampled token). Two passes over the same compiled grammar: "cold"
// fills the per-position caches as it meets positions, "warm" finds them filled (what every
// later request with the same schema and model sees). Tokens are sampled from the masked
// logits (Gumbel-max at --temp); a completed document is parsed, then a new one starts.
#pragma once

#include <cstdint>
#include <string>

namespace kamera::cli {

struct GrammarBenchArgs {
  std::string model;
  std::string schema;  // a JSON Schema file; empty: any JSON object
  int tokens = 256;    // tokens generated per pass
  int threads = 1;
  float temperature = 1.0f;
  uint64_t seed = 1;
  bool json = false;
};

int run_bench_grammar(const GrammarBenchArgs& a);

}  // namespace kamera::cli
