// The agent demo (`kamera demo`, the first thing `make demo` runs): an agent watches a stream of
// frames through a sliding window of W frames, on the mini vision-language model
// (minivl/minivl.h), and answers one-word questions about what the window shows.
//
//   stream   a Test-split stream of N frames (minivl::make_stream); frame t arrives at step t and
//            is encoded once by the vision encoder (the vision cache), then cached as a canonical
//            chunk KV(frame | <bos>)
//   window   a Window (window/window.h) over one pool sequence [<bos>][frame]...[frame]: while it
//            fills, frames are admitted at the back; once it holds W frames, each new frame
//            slides it: evict_front() (the survivors keep their conditioned KV and only move: a
//            position-metadata write, checked bit-for-bit), then admit_back() with a rank-R patch
//            formed on the window it joins (form-on-miss: one conditioned forward + SVD)
//   question at every step once the window is full: alternately a single-hop and a cross-frame
//            question about the window's W frames as the model sees them (frame words f0.. =
//            index within the window; cross-frame when the window holds a well-posed event, else
//            single-hop); every recall_every-th question is a RECALL question instead: a
//            single-hop question about a frame evicted earlier, answered on a fork of the window
//            in which the oldest frame is evicted and the recalled one is placed at the front
//            (recall(id, 0, Fresh): exact, nothing before it), so the model still sees W frames;
//            the question says f0
//   arms     kamera: the question's tokens forwarded over the window's cached KV (TTFT: that
//            forward); re-prefill: one decoder forward over [<bos>, the same W frames'
//            embeddings, question] in a fresh sequence (the vision embeddings come from the same
//            cache, so this is a prefix-cache miss, not a vision re-encode). Both answer with the
//            argmax at the question's last token; the arms alternate order, and after one
//            untimed warm-up run each is timed `reps` times (median).
//
// The patch formation at admission runs a forward over the whole window: that work happens when
// the frame arrives, not when a question is asked; the demo reports it (ops.forwards, cache_ms)
// next to the TTFTs.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "context/context.h"
#include "minivl/minivl.h"
#include "model/forward.h"

namespace kamera {

struct AgentDemoOptions {
  int n_frames = 24;     // stream length
  int window = 6;        // frames in the window, 2..16 (the model was trained on 6)
  uint64_t clip = 0;     // Test-split stream index
  int rank = 16;         // patch rank (kFullRank: full); capped at a frame's tokens
  int recall_every = 4;  // every k-th question is a recall question (0: none)
  int reps = 5;          // timed repetitions of each arm per question (the median is reported)
  std::string png_path;  // the picture (empty: none)
  // Writes each stream frame as frames_dir/frame-NNNN.png (32 x 32 RGB, NNNN = the stream index
  // from 0000), so that another client (kamera serve, a replay) can send the same frames (empty:
  // none). The folder is created.
  std::string frames_dir;
};

// The file name of stream frame i under frames_dir: "frame-0007.png".
std::string demo_frame_file(int i);

enum class DemoQuestionType { SingleHop = 0, CrossFrame = 1, Recall = 2 };
const char* demo_question_type_name(DemoQuestionType t);

// Cache work of one step (or of the whole run), measured from the window, the store and the pool.
struct DemoOps {
  int frames_encoded = 0;     // vision encoder runs (each frame once: the vision cache)
  int canonicals_formed = 0;  // decoder forwards of [<bos> · frame] (store misses)
  int patches_formed = 0;     // conditioned forwards of [<bos> · window · frame] + truncated SVD
  int patches_applied = 0;    // rank-m products added onto canonical rows in the pool
  int chunks_admitted = 0, chunks_evicted = 0, chunks_recalled = 0;
  int chunks_relocated = 0;      // chunks whose position changed: metadata only, no bytes moved
  int64_t tokens_relocated = 0;  // their tokens (one position write each)
  int64_t kv_bytes_written = 0;  // bytes written into pool rows (admitted and recalled chunks,
                                 // copy-on-write page copies); relocation writes none
  int64_t patch_bytes = 0;       // stored factors of the patches formed
  int forwards = 0;              // decoder forwards on the cache path (canonicals + patches)
  int64_t tokens_forwarded = 0;  // tokens those forwards computed
  int64_t cow_pages = 0;         // pages copied because a fork shared them
  double vision_ms = 0;          // encoder time
  double cache_ms = 0;           // window operations: slide, admission (incl. patch formation),
                                 // fork and recall
  DemoOps& operator+=(const DemoOps& o);
};

struct DemoQuestion {
  DemoQuestionType type = DemoQuestionType::SingleHop;
  std::string kind;                             // colour_of, shape_of, appeared_after, took_cell
  std::string text;                             // the question's words
  std::vector<int32_t> tokens;                  // their word ids
  std::vector<int> stream_frames;               // stream frames the answer depends on
  std::vector<int> frames;                      // the stream frames the model sees, in order
  int32_t gold = 0, kamera = 0, reprefill = 0;  // answer word ids
  double kamera_ms = 0, reprefill_ms = 0;       // TTFT (median of reps)
  double kl = 0;                                // KL(p_reprefill || p_kamera) at the answer, nats
  bool fallback = false;  // a cross-frame question was due but the window held none
};

struct DemoStep {
  int step = 0;                           // frame `step` arrives
  int window_first = 0, window_last = 0;  // stream frames in the window after the step
  int evicted = -1;                       // slid out at this step (-1: none)
  int recalled = -1, fork_dropped = -1;   // recall question: recalled / left out of the fork
  int fork_forwards = 0;                  // forwards the fork and recall ran (0: exact front)
  DemoOps ops;
  bool relocation_checked = false;  // a slide (or a fork) happened and its survivors were compared
  bool relocation_exact = true;     // their KV bytes unchanged (slide: positions moved by exactly
                                    // one frame; fork: its survivors' rows are the window's)
  std::optional<DemoQuestion> question;
};

struct DemoTypeSummary {
  int count = 0, kamera_correct = 0, reprefill_correct = 0, agree = 0, fallbacks = 0;
  double mean_kl = 0, kamera_ms = 0, reprefill_ms = 0;  // means
};

struct AgentDemoResult {
  AgentDemoOptions options;
  std::string decoder_path, vision_path;
  int tokens_per_frame = 0, frame_extent = 0;
  int rank_used = 0;  // the patch rank actually applied (capped), kFullRank when full
  bool rank_is_full = false;
  int threads = 0;
  std::vector<std::string> events;  // the stream's transitions, for people
  std::vector<DemoStep> steps;
  std::array<DemoTypeSummary, 3> by_type{};  // indexed by DemoQuestionType
  DemoTypeSummary all;
  DemoOps totals;
  double speedup = 0;         // mean re-prefill TTFT / mean kamera TTFT
  double median_speedup = 0;  // median of the per-question ratios
  bool relocation_exact = true;
  double wall_s = 0;
  std::string png_written;  // path, empty when none
  int png_width = 0, png_height = 0;
};

// A context for run_agent_demo on this model: the decoder, BOS as the anchor, room for the
// window, its forks, a re-prefill sequence and the cache's scratch sequences.
ContextOptions agent_demo_context(const AgentDemoOptions& opts, int n_threads);

// `ctx` holds model.decoder (see agent_demo_context).
Result<AgentDemoResult> run_agent_demo(const minivl::MiniVl& model, Context& ctx,
                                       const AgentDemoOptions& opts);

nlohmann::json agent_demo_json(const AgentDemoResult& r);

// The picture's layout (no text; the legend is in the CLI's output and --help):
//   s = 2 when n_frames <= 32, else 1; cell = 32 s pixels; column pitch = cell + 4
//   top:    the stream's frames in one row at (8 + i * pitch, 8), scaled by s
//   rows:   one per step at y = 8 + cell + 8 + step * 14, 10 pixels tall, one box per stream
//           frame under its column: light grey = outside the window, grey = in the window, green
//           = admitted at this step, yellow = recalled (on the fork), orange = left out of the
//           fork
//   bars:   right of the frames (x0 = 8 + n * pitch - 4 + 16, up to 320 pixels): per question
//           step, re-prefill TTFT in red (top, 5 pixels) and kamera TTFT in blue (below), one
//           common scale (the longest bar is 320 pixels)
//   size:   width = x0 + 320 + 8, height = 8 + cell + 8 + n_frames * 14 + 8
std::pair<int, int> agent_demo_png_size(int n_frames);
inline constexpr int kAgentDemoPngMaxFrames = 256;  // longer streams: no picture

}  // namespace kamera
