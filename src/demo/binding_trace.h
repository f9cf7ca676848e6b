// Frame traces that bind across frames and break position-free reuse (`kamera demo --binding
// reorder|recall`, issue 52): the agent demo's stream (a Test-split minivl::make_stream) asked
// about in views that a sliding window never produces, each question derived from the view's
// frames as the model sees them (minivl::all_questions: the gold answer is the generator's, not a
// model's). No model runs here; a replay client sends the views (scripts/minivl_frames.py).
//
//   reorder  the stream cut into sets of W consecutive frames; each set is asked about once in
//            stream order ("slide"), then `reorders` times in another order ("reorder": the same
//            frames re-sorted, as a reranker or a video agent would send them). A reorder's
//            ordering is drawn (seeded: shuffles, rotations, swaps, moves) until it offers a
//            cross-frame question whose event frames include a frame that now follows another
//            frame than it followed in its latest earlier view; else any cross-frame question;
//            else single-hop.
//   recall   the window slides over the stream ("slide": the window's frames in stream order,
//            cross-frame questions preferred); every recall_every-th question is a "recall": an
//            evicted frame is put back into the window (its oldest frame left out) at a drawn
//            place, so it follows frames it was never computed behind; drawn until the view
//            offers a cross-frame question whose frames include the recalled one; else a
//            single-hop question about the recalled frame.
//
// Per question `binds` says whether a frame the answer depends on follows another frame (or none)
// than in the latest earlier view that held it: where a server that serves that frame's rows as
// they were (`keep`) conditions the answer on a neighbour the view no longer has.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "minivl/clips.h"

namespace kamera {

struct BindingTraceOptions {
  std::string mode = "reorder";  // "reorder" or "recall"
  int n_frames = 24;             // stream length (Test split)
  int window = 6;                // frames per view (the model was trained on 6)
  uint64_t clip = 0;             // Test-split stream index
  int reorders = 2;              // reorder: re-sorted views per set
  int recall_every = 2;          // recall: every k-th question recalls an evicted frame (>= 1)
  int tries = 400;               // orderings / placements drawn per question before falling back
};

struct BindingQuestion {
  std::string situation;           // "slide", "reorder", "recall"
  std::vector<int> frames;         // stream frames as the model sees them, in order
  minivl::Question q;              // frame words and q.frames index into `frames`
  std::vector<int> stream_frames;  // q.frames as stream frames
  int recalled = -1;               // recall: the stream frame put back
  bool binds = false;              // see the header comment
  bool fallback = false;           // no binding cross-frame question was found for this view
};

struct BindingTrace {
  BindingTraceOptions options;
  minivl::Clip stream;
  std::vector<BindingQuestion> questions;
};

Result<BindingTrace> make_binding_trace(const BindingTraceOptions& opts);

// Writes each stream frame as dir/frame-NNNN.png (demo_frame_file), the folder created.
Status write_binding_frames(const BindingTrace& t, const std::string& dir);

// {"config": ..., "steps": [{"step": i, "question": {type, kind, text, tokens, frames,
// stream_frames, gold, binds, recalled, fallback}}]}: the agent demo's JSON shape, without its
// arms' answers (scripts/minivl_frames.py reads both).
nlohmann::json binding_trace_json(const BindingTrace& t);

}  // namespace kamera
