// kamera bench attention: one decode step's attention alone at a depth. A model shape's layers
// (default: the 0.5b preset, Qwen2.5-0.5B's 24 layers of 14 heads over 2 KV heads of 64), each
// with its own arena of --ctx cached keys and values (so a step reads the cache from memory, as
// the model's does), one query per layer through attention_paged: the split over the keys
// (ops/attention_split.h) against the per-head path it replaced at depth, alternated rep by rep
// in one process, with their outputs compared. docs/BENCHMARKS.md, "Decode at depth".
#pragma once

#include <string>

#include "core/dtype.h"

namespace kamera::cli {

struct AttentionBenchArgs {
  std::string model;  // shape from this model; empty: the 0.5b preset's
  int ctx = 4096;     // cached keys each layer's query reads (its own included)
  int reps = 3;       // timed steps per path after one warm-up each
  int threads = 1;    // one: thread CPU time per step; more: wall time
  DType kv_type = DType::F32;
  bool json = false;
};

int run_bench_attention(const AttentionBenchArgs& a);

}  // namespace kamera::cli
