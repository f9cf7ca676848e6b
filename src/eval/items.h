// Items for the evaluation suite beyond the text files in data/: seeded random-token items for
// synthetic models, and embedding-chunk items (frames of vision-like rows on a 3-D position grid)
// for the multimodal presets. Random weights measure exactness and speed, never accuracy.
#pragma once

#include <cstdint>
#include <vector>

#include "eval/reuse_bench.h"

namespace kamera {

struct TokenItemSpec {
  int n_items = 8;
  int antecedent_tokens = 32, chunk_tokens = 32, query_tokens = 8;
  uint64_t seed = 1;
};

// A, B and Q of uniformly random token ids (BOS and the first few ids excluded).
std::vector<ReuseItem> random_token_items(const Model& model, const TokenItemSpec& spec);

struct FrameItemSpec {
  int n_items = 8;
  int grid_h = 4, grid_w = 6;  // tokens per frame = grid_h * grid_w
  int query_tokens = 8;
  float noise = 0.15f;  // per-token noise relative to the frame's structure
  uint64_t seed = 1;
};

// Each item is two consecutive frames of one synthetic clip: A = frame 0, B = frame 1 (each a
// chunk of grid_h x grid_w embedding rows with layout (t = 0, h, w), so the chunk's extent is
// max(grid_h, grid_w)), then a text query of random ids. A clip's rows share a base vector and a
// smooth spatial field (a few low-frequency waves over (h, w)) that drifts from frame to frame,
// plus noise; rows are scaled to the RMS of the model's token embeddings.
std::vector<ReuseItem> frame_items(const Model& model, const FrameItemSpec& spec);

// Positions of a grid_h x grid_w frame at relative time t: (t, h, w) row-major.
std::vector<Pos> frame_layout(int t, int grid_h, int grid_w);

}  // namespace kamera
