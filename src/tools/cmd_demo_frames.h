// `kamera demo --decoder D --vision V --frames DIR`: the agent demo on a user's Qwen2-VL /
// Qwen2.5-VL model and a folder of frames (demo/frames_demo.h).
#pragma once

#include <string>

namespace kamera::cli {

struct FramesDemoArgs {
  std::string decoder, vision, dir, rank = "16", question;
  int window = 0;  // 0: min(4, frames)
  int reps = 3, recall_every = 3, reorder_every = 4, threads = 1;
  bool json = false, quiet = false;
};

int run_frames_demo_cli(const FramesDemoArgs& a);

}  // namespace kamera::cli
