// kamera-train's text subcommands: the copying pair trained on synthetic tool loops
// (train/toolloop.h, docs/SPECTRAIN.md) and the trace of held-out loops the benchmark replays.
#pragma once

#include <cstdint>
#include <string>

namespace kamera::train {

struct TextTrainArgs {
  uint64_t seed = 1;
  int steps = 2000, batch = 6, max_len = 640, warmup = 30, threads = 2;
  int eval_every = 50, eval_n = 48;
  int copy_batch = 0;  // copy-curriculum sequences per step (text_train.cpp, copy_batch)
  double lr = 3e-3, weight_decay = 0.01, other_weight = 0.25;
  std::string dims = "layers=3,dim=256,heads=4,kv_heads=2,head_dim=64,ffn=512";
  int vocab = 1024;
  std::string init;  // continue from this GGUF's weights (the same shape)
  std::string type = "q8_0", out = "models/toolloop/target.gguf", name = "kamera-toolloop";
  // 0: the steps alone; else the run ends at whichever comes first (the schedule follows it)
  double max_minutes = 0;
};

int run_text_train(const TextTrainArgs& a);

// Held-out transcripts [first, first + n) of the test split as JSON: [[{role, content}, ...], ...]
int run_loop_trace(uint64_t first, int n, const std::string& out);

}  // namespace kamera::train
