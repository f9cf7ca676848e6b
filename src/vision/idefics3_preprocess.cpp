#include "vision/idefics3_preprocess.h"

#include <algorithm>
#include <cmath>

#include "media/resize.h"
#include "tokenizer/tokenizer.h"
#include "vision/vl_prompt.h"

namespace kamera {

namespace {

constexpr int kMaxImageSize = 4096;  // SmolVLM's image processor's upper bound

int ceil_to(double v, int unit) {
  return int(std::ceil(v / unit)) * unit;
}

// Step 1 (_resize_output_size_rescale_to_max_len, then _scale_below_upper_bound).
std::pair<int, int> longest_edge_size(int w, int h, int longest) {
  const double aspect = double(w) / h;
  if (w >= h) {
    w = longest;
    h = int(w / aspect);
    if (h % 2) ++h;
  } else {
    h = longest;
    w = int(h * aspect);
    if (w % 2) ++w;
  }
  w = std::max(w, 1);
  h = std::max(h, 1);
  const double a2 = double(w) / h;
  if (w >= h && w > kMaxImageSize) {
    w = kMaxImageSize;
    h = int(w / a2);
  } else if (h > w && h > kMaxImageSize) {
    h = kMaxImageSize;
    w = int(h * a2);
  }
  return {std::max(w, 1), std::max(h, 1)};
}

// Step 2 (resize_for_vision_encoder).
std::pair<int, int> tile_multiple_size(int w, int h, int tile) {
  const double aspect = double(w) / h;
  if (w >= h) {
    w = ceil_to(w, tile);
    h = ceil_to(int(w / aspect), tile);
  } else {
    h = ceil_to(h, tile);
    w = ceil_to(int(h * aspect), tile);
  }
  return {w, h};
}

}  // namespace

Result<Idefics3Grid> idefics3_grid(int width, int height, const Idefics3VisionConfig& c) {
  if (width < 1 || height < 1)
    return make_error(ErrorCode::InvalidArgument, "idefics3 preprocess: image of {} x {}", width,
                      height);
  const auto [w1, h1] = longest_edge_size(width, height, c.longest_edge);
  const auto [w2, h2] = tile_multiple_size(w1, h1, c.image_size);
  Idefics3Grid g;
  g.width = w2;
  g.height = h2;
  if (w2 > c.image_size || h2 > c.image_size) {
    g.rows = h2 / c.image_size;  // sides are multiples of the tile: ceil is exact
    g.cols = w2 / c.image_size;
  }
  return g;
}

Result<Idefics3Tiles> idefics3_preprocess(const Image& image, const Idefics3VisionConfig& c) {
  KAMERA_ASSIGN_OR_RETURN(const Idefics3Grid g, idefics3_grid(image.width, image.height, c));
  const auto [w1, h1] = longest_edge_size(image.width, image.height, c.longest_edge);
  KAMERA_ASSIGN_OR_RETURN(const Image step1, resize_lanczos(image, w1, h1));
  KAMERA_ASSIGN_OR_RETURN(Image step2, resize_lanczos(step1, g.width, g.height));
  Idefics3Tiles out;
  out.grid = g;
  const int t = c.image_size;
  for (int r = 0; r < g.rows; ++r)
    for (int col = 0; col < g.cols; ++col) {
      KAMERA_ASSIGN_OR_RETURN(Image tile, crop_image(step2, col * t, r * t, t, t));
      out.tiles.push_back(std::move(tile));
    }
  if (g.rows == 0) {
    out.tiles.push_back(std::move(step2));  // one tile already
  } else {
    KAMERA_ASSIGN_OR_RETURN(Image global, resize_lanczos(step2, t, t));
    out.tiles.push_back(std::move(global));
  }
  return out;
}

Result<Idefics3Vocab> idefics3_vocab(const Tokenizer& tok) {
  Idefics3Vocab v;
  v.fake = find_piece(tok, "<fake_token_around_image>");
  v.global = find_piece(tok, "<global-img>");
  if (v.fake < 0 || v.global < 0 || find_piece(tok, "<row_1_col_1>") < 0)
    return make_error(ErrorCode::InvalidArgument,
                      "the decoder's vocabulary lacks SmolVLM's image tokens "
                      "(<fake_token_around_image>, <global-img>, <row_1_col_1>)");
  v.newline = tok.encode_raw("\n");
  v.double_newline = tok.encode_raw("\n\n");
  auto row_col = [&](int r, int col) {
    return find_piece(tok, "<row_" + std::to_string(r) + "_col_" + std::to_string(col) + ">");
  };
  while (row_col(v.max_side + 1, v.max_side + 1) >= 0) ++v.max_side;
  for (int r = 1; r <= v.max_side; ++r)
    for (int col = 1; col <= v.max_side; ++col) {
      const int32_t id = row_col(r, col);
      if (id < 0)
        return make_error(
            ErrorCode::InvalidArgument,
            "the decoder's vocabulary has <row_{0}_col_{0}> but not <row_{1}_col_{2}>", v.max_side,
            r, col);
      v.row_col.push_back(id);
    }
  return v;
}

Result<std::vector<Idefics3Piece>> idefics3_layout(const Idefics3Grid& g, const Idefics3Vocab& v) {
  if (g.rows > v.max_side || g.cols > v.max_side)
    return make_error(ErrorCode::InvalidArgument,
                      "a picture of {0} x {1} tiles: the decoder's vocabulary names tiles up to "
                      "<row_{2}_col_{2}>",
                      g.rows, g.cols, v.max_side);
  std::vector<Idefics3Piece> out;
  auto token = [&out](int32_t t) { out.push_back({t, -1}); };
  for (int r = 0; r < g.rows; ++r) {
    for (int col = 0; col < g.cols; ++col) {
      token(v.fake);
      token(v.row_col[size_t(r * v.max_side + col)]);
      out.push_back({-1, r * g.cols + col});
    }
    for (int32_t t : r + 1 < g.rows ? v.newline : v.double_newline) token(t);
  }
  token(v.fake);
  token(v.global);
  out.push_back({-1, g.rows * g.cols});
  token(v.fake);
  return out;
}

int64_t idefics3_layout_rows(const std::vector<Idefics3Piece>& layout,
                             const Idefics3VisionConfig& c) {
  int64_t n = 0;
  for (const Idefics3Piece& p : layout) n += p.tile >= 0 ? c.tile_rows() : 1;
  return n;
}

}  // namespace kamera
