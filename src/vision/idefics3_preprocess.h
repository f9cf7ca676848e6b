// Image preprocessing of SmolVLM / SmolVLM2, as its Hugging Face processor does it
// (Idefics3ImageProcessor, do_image_splitting on; resample LANCZOS through PIL, media/resize.h):
//   1. resize so that the longer side is longest_edge (up or down), the other side
//      int(longer / aspect) rounded up to even, both capped at 4096 (SmolVLMImageProcessor's
//      MAX_IMAGE_SIZE; Idefics3ImageProcessor's cap is 1820);
//   2. resize again, without keeping the aspect, to multiples of the tile (image_size): the longer
//      side rounded up, the other int(longer' / aspect) rounded up;
//   3. a picture larger than one tile is cut into rows x cols tiles (raster order) and followed
//      by the global image: the picture of step 2 resized to one tile; a picture of one tile is
//      the global image alone (rows = cols = 0);
//   4. each tile normalized (v / 255 - mean) / std (idefics3_encoder.h).
// llama.cpp d32676d departs from it (docs/VISION.md): it computes the grid from the original size
// scaled to longest_edge (no even rounding), fits the picture into it keeping the aspect with
// its own bicubic and pads the rest black, and resizes the original, bilinearly, for the global
// image; it always writes a global image after the tiles (one tile and a global image for a
// picture HF keeps whole). Both cut a picture whose longer side is longest_edge and whose sides
// are multiples of the tile into the same tiles.
//
// The prompt of a picture (Idefics3Processor), tiles split:
//   for each row r, each column c: <fake_token_around_image><row_r_col_c> (tile rows)
//   after each row "\n"; after the last one the tokenizer reads "\n\n" as one text
//   <fake_token_around_image><global-img> (global rows) <fake_token_around_image>
// whole: <fake_token_around_image><global-img> (rows) <fake_token_around_image>.
// llama.cpp writes the same tokens ("\n" between rows, the "\n\n" token before the global image).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "vision/idefics3_vision.h"

namespace kamera {

class Tokenizer;

struct Idefics3Grid {
  int rows = 0, cols = 0;                          // 0 x 0: the picture is one tile (no split)
  int width = 0, height = 0;                       // after step 2
  int n_tiles() const { return rows * cols + 1; }  // the global image included
};

// Steps 1 and 2 from the picture's size alone. Errors: an empty picture.
Result<Idefics3Grid> idefics3_grid(int width, int height, const Idefics3VisionConfig& c);

struct Idefics3Tiles {
  Idefics3Grid grid;
  std::vector<Image> tiles;  // rows x cols tiles in raster order, then the global image
};

// Steps 1 to 3.
Result<Idefics3Tiles> idefics3_preprocess(const Image& image, const Idefics3VisionConfig& c);

// The tokens of the prompt around a picture, from the decoder's vocabulary.
struct Idefics3Vocab {
  int32_t fake = -1, global = -1;
  std::vector<int32_t> newline, double_newline;  // the tokenizer's "\n" and "\n\n"
  int max_side = 0;                              // <row_r_col_c> exists for r, c <= max_side
  std::vector<int32_t> row_col;  // max_side x max_side, (r - 1) * max_side + (c - 1)
};

// Errors (InvalidArgument): a vocabulary without <fake_token_around_image>, <global-img> or
// <row_1_col_1>.
Result<Idefics3Vocab> idefics3_vocab(const Tokenizer& tok);

// One piece of a picture's prompt: a token, or a tile's rows (tile index: raster, global last).
struct Idefics3Piece {
  int32_t token = -1;
  int tile = -1;
};

// The picture's prompt (the layout above). Errors: a grid beyond the vocabulary's row / column
// tokens.
Result<std::vector<Idefics3Piece>> idefics3_layout(const Idefics3Grid& g, const Idefics3Vocab& v);

// Rows the picture takes in the prompt: its tokens and its tiles' rows.
int64_t idefics3_layout_rows(const std::vector<Idefics3Piece>& layout,
                             const Idefics3VisionConfig& c);

}  // namespace kamera
