// `kamera eval --suite mini-vl`: the mini vision-language model on held-out clips. Each frame is
// a chunk; every arm builds the same [<bos>][frame 0..F-1] sequence its own way, then the
// question is prefilled and the answer read at its last token.
//
//   reprefill        the decoder forward over everything (the ceiling)
//   blind            each frame's canonical (cached alone, behind <bos>), relocated
//   patch rank m     canonical + rank-m patch of the deficit behind the frames before it
//   patch deep half  the same, deepest half of the layers only
//   cacheblend, epic, vlcache   token recompute in context on top of blind (eval/baselines.h)
//
// Reported per arm and question family (single_hop, cross_frame, and two_frame with
// opts.two_frame): accuracy against the gold answer, KL(p_reprefill || p_arm)
// at the answer, eta = 1 - KL/KL_blind, flip-recover on the questions whose answer blind reuse
// changes (relative to re-prefill), and the extra bytes / FLOPs of the arm.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "context/context.h"
#include "minivl/minivl.h"
#include "model/forward.h"

namespace kamera {

// The first test-split clip of the mini-VL "dev" range: disjoint from the reported range
// [0, n_clips), so a setting chosen on one is checked on the other.
inline constexpr int kMiniVlDevFirstClip = 100000;

struct MiniVlEvalOptions {
  int n_clips = 100;   // held-out (Test split) clips, all their questions
  int first_clip = 0;  // their first index: 0 is the reported held-out range; the dev range is
                       // kMiniVlDevFirstClip (both never trained on)
  int n_frames = 6;
  std::vector<int> ranks = {1, 2, 4, 16, 64, -1};  // -1: full; capped at each frame's rank
  bool baselines = true;
  bool output_patches = false;  // also "patch_output" arms at every rank (all layers)
  bool two_frame = false;       // clips with the two-frame family too (mini-VL v2)
  std::function<void(int done, int total)> progress;
};

// A context for run_minivl_eval on this model: the decoder, BOS as the anchor, room for the
// clips' sequences and forks.
ContextOptions minivl_eval_context(const minivl::MiniVl& model, const MiniVlEvalOptions& opts,
                                   int n_threads);

// `ctx` holds model.decoder (see minivl_eval_context).
Result<nlohmann::json> run_minivl_eval(const minivl::MiniVl& model, Context& ctx,
                                       const MiniVlEvalOptions& opts);

}  // namespace kamera
