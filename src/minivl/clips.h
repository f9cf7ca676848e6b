// Synthetic clips for the mini vision-language model: short sequences of small RGB frames with a
// few coloured shapes on a grid that appear, move and vanish, and question/answer pairs over a
// small word vocabulary. Question families: single-hop readouts (a fact inside one frame),
// cross-frame bindings (the answer needs two frames bound together, found through an event) and,
// for mini-VL v2, two-frame lookups (two frames named in the question: a cell found in one, read
// in the other). Seeded and deterministic; the train and test splits draw from disjoint seed
// streams.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kamera::minivl {

constexpr int kFramePixels = 32;                   // frames are 32 x 32 RGB
constexpr int kGrid = 4;                           // shapes sit in a 4 x 4 grid of cells
constexpr int kCellPixels = kFramePixels / kGrid;  // 8 x 8 pixels per cell
constexpr int kMaxFrames = 16;          // frame words f0 .. f15 (clips, question windows)
constexpr int kMaxStreamFrames = 4096;  // make_stream's limit

enum class Family : uint8_t { SingleHop, CrossFrame, TwoFrame };
constexpr int kNumFamilies = 3;
const char* family_name(Family f);  // "single_hop", "cross_frame", "two_frame"
enum class Split : uint8_t { Train, Test };

// The word vocabulary shared by the generator, the trainer and the engine (token ids). Fixed
// order; id 0 is <pad>, 1 is <bos>, 2 is <eos>.
const std::vector<std::string>& words();
int32_t word_id(std::string_view w);  // -1 when unknown
int32_t bos_id();
const std::vector<std::string>& shape_names();   // e.g. square circle triangle cross
const std::vector<std::string>& colour_names();  // e.g. red green blue yellow magenta cyan
constexpr int kVocabSize = 64;                   // >= words().size(); the decoder's vocabulary size

struct Object {
  int shape = 0, colour = 0;  // indices into shape_names() / colour_names()
  int row = 0, col = 0;       // cell
};

struct Frame {
  std::vector<Object> objects;  // present in this frame
  std::vector<uint8_t> rgb;     // kFramePixels x kFramePixels x 3, row-major
};

struct Question {
  Family family = Family::SingleHop;
  std::string kind;             // "colour_of", "shape_of", "appeared_after", "took_cell",
                                // "shape_in_cell", "colour_in_cell"
  std::vector<int32_t> tokens;  // the question's word ids (no <bos>, no answer)
  int32_t answer = 0;           // the answer word id
  std::vector<int> frames;      // frames the answer depends on (ascending)
  std::string text() const;     // the words joined by spaces, then " -> " and the answer
};

// Defaults: the shape the committed mini-VL was trained on (docs/MINIVL.md).
struct ClipSpec {
  int n_frames = 6;
  int min_objects = 1, max_objects = 3;  // present per frame
  int questions_per_family = 3;
  // mini-VL v2: also questions_per_family two-frame questions, and timelines are drawn until they
  // offer one. Off, clips are exactly the v1 generator's (same frames, same questions).
  bool two_frame = false;
};

struct Clip {
  uint64_t seed = 0;
  std::vector<Frame> frames;
  std::vector<Question> questions;
  std::vector<std::string> events;  // one line per frame transition, for people
};

// The seed of a clip: a fixed bijective hash of (split, index), so the splits never share one.
uint64_t clip_seed(Split split, uint64_t index);

// The clip with this index in the split (index -> seed is a fixed, split-specific mapping).
// spec.n_frames <= kMaxFrames.
Clip make_clip(Split split, uint64_t index, const ClipSpec& spec = {});

// A stream of any length (spec.n_frames <= kMaxStreamFrames) from the same generator: for
// n_frames <= kMaxFrames it is exactly make_clip's clip; longer streams have frames and events
// but no questions (frame words cannot name frames past f15: ask about a window of the stream
// with make_questions / all_questions instead).
Clip make_stream(Split split, uint64_t index, const ClipSpec& spec = {});

// Questions about ANY frame sequence (e.g. the frames an agent's window holds), derived from the
// frames' objects alone; frame words are indices into `frames`, so single-hop questions are asked
// about the first kMaxFrames frames only. Cross-frame kinds need a well-posed event in the
// sequence: appeared_after needs X to appear once, as the only change into its frame, followed
// by a single appearance; took_cell needs X to leave one cell exactly once, re-occupied within
// two frames by another object. On a generated clip this is the event-based derivation that
// make_clip uses.
// The two-frame family is drawn by make_clip only (spec.two_frame); these two keep to the first
// two.
//   all_questions:  every valid question, in a fixed order (colour_of, shape_of, appeared_after,
//                   took_cell; by frame, then key)
//   make_questions: up to per_family of each family, drawn as make_clip draws them (kinds in
//                   rotation, seeded by `seed`)
std::vector<Question> all_questions(const std::vector<Frame>& frames);
std::vector<Question> make_questions(const std::vector<Frame>& frames, uint64_t seed,
                                     int per_family);

// An 8-bit RGB image in memory, row-major, for pictures built from frames and filled boxes.
using Rgb = std::array<uint8_t, 3>;
struct Canvas {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width x height x 3
  Canvas(int w, int h, Rgb background);
  void fill(int x, int y, int w, int h, Rgb colour);         // clipped to the canvas
  void draw_frame(const Frame& f, int x, int y, int scale);  // top-left at (x, y); clipped
};

// Writes the canvas as a PNG (`path`.tmp, then renamed into place); errors name the path.
Status write_png(const std::string& path, const Canvas& canvas);

// Renders frames side by side (with a 1-pixel gap, scaled by `scale`) to a PNG file.
// Image size: (n * 33 - 1) * scale by 32 * scale pixels, 8-bit RGB, grey (128) gap. Writes
// `path`.tmp and renames it into place, so `path` is never half-written; errors name the path.
Status write_frames_png(const std::string& path, const std::vector<Frame>& frames, int scale = 4);

}  // namespace kamera::minivl
