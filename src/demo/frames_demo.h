// The agent demo on a user's vision-language model (`kamera demo --decoder D --vision V --frames
// DIR`): a Qwen2-VL / Qwen2.5-VL decoder (GGUF) with its vision tower (llama.cpp's mmproj GGUF)
// watches a folder of PNG / JPEG frames (sorted by name) through a sliding window of W frames.
//
//   frame    decoded, preprocessed and encoded once (vision/image_chunks.h), then one position-free
//            chunk of embedding rows: <|vision_start|> + the image's merged patches +
//            <|vision_end|> with the (t, h, w) layout of vision/rope_index.h (the delimiters'
//            rows are their token embeddings, at the positions the chat template gives them)
//   window   a Window (window/window.h) over [anchor][frame]...: admitted at the back with a
//            rank-R patch formed on the window it joins; once full, each new frame slides it
//            (evict the oldest: the survivors only move)
//   question once the window is full, at every step, the same question text after the window, in
//            one of three situations, in turn:
//              slide    the window as it is
//              reorder  every reorder_every-th question: the window reversed on a fork
//                       (Exact: each ordering's own patches)
//              recall   every recall_every-th question: on a fork, the oldest frame evicted and a
//                       frame evicted earlier recalled at the front (Fresh), so W frames are seen
//   arms     kamera (the question forwarded over the cached window or fork: TTFT), re-prefill (one
//            forward over [anchor, the same frames' rows, question] in a fresh sequence: the
//            reference; its vision rows come from the cache) and blind (the same chunks served
//            from their canonicals, no patch: the base of eta).
//   report   per question: KL(re-prefill || kamera), KL(re-prefill || blind), whether the argmax
//            flips; per situation and overall: mean KL, eta = 1 - KL / KL_blind, flips, TTFTs.
// No gold answers: a user's model and frames come without them; the reference is re-prefill.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "context/context.h"
#include "vision/qwen_vision.h"

namespace kamera {

struct FramesDemoOptions {
  int window = 4;         // frames in the window (>= 2)
  int rank = 16;          // patch rank (kFullRank: full)
  int recall_every = 3;   // every k-th question is a recall question (0: none)
  int reorder_every = 4;  // every k-th question is asked on the reversed window (0: none)
  int reps = 3;           // timed runs of each arm (median)
  std::string question = "What changed between the frames?";
};

struct FramesDemoQuestion {
  std::string situation;                         // "slide", "reorder", "recall"
  int recalled = -1;                             // recall: the frame recalled at the front
  std::vector<int> frames;                       // frame indices as the model sees them, in order
  int32_t kamera = 0, reprefill = 0, blind = 0;  // argmax token ids
  double kl = 0, kl_blind = 0;                   // nats, against re-prefill
  double kamera_ms = 0, reprefill_ms = 0;        // TTFT (median of reps)
};

struct FramesDemoStep {
  int step = 0;  // frame `step` arrives
  std::string frame;
  int evicted = -1;
  int tokens = 0;        // rows of the frame chunk
  double encode_ms = 0;  // the tower (preprocessing included)
  double admit_ms = 0;   // slide + admission (patch formation included)
  bool question = false;
  FramesDemoQuestion q;
};

struct FramesDemoSummary {
  int count = 0, flips = 0, blind_flips = 0;
  double mean_kl = 0, mean_kl_blind = 0, eta = 0;  // eta: NAN when blind's KL is 0
  double kamera_ms = 0, reprefill_ms = 0;          // means
};

struct FramesDemoResult {
  FramesDemoOptions options;
  std::string decoder_path, vision_path;
  int threads = 0, n_frames = 0;
  std::vector<FramesDemoStep> steps;
  FramesDemoSummary slide, reorder, recall, all;
  double encode_ms_per_frame = 0, admit_ms_per_frame = 0;
  double wall_s = 0;
};

// The frame files of a folder: *.png, *.jpg, *.jpeg (any case), sorted by name. Errors: not a
// folder, fewer than 2 frames.
Result<std::vector<std::string>> list_frames(const std::string& dir);

// ctx holds the decoder (a qwen2vl model of the tower's output width).
Result<FramesDemoResult> run_frames_demo(Context& ctx, const QwenVisionModel& tower,
                                         const std::vector<std::string>& frames,
                                         const FramesDemoOptions& opts);

nlohmann::json frames_demo_json(const FramesDemoResult& r);

}  // namespace kamera
