// Qwen3-VL's video placement (vision/qwen3vl_video.h): the pairs' timestamps as transformers'
// _calculate_timestamps gives them, the timestamp text, and the pieces' positions against an
// independent rewrite of Qwen3-VL's get_rope_index over the same token sequence.
#include <gtest/gtest.h>

#include "support/tiny_models.h"
#include "vision/qwen3vl_video.h"
#include "vision/rope_index.h"
#include "vision/vl_prompt.h"

namespace {

using namespace kamera;

TEST(Qwen3VlVideo, TimestampsAsTheProcessor) {
  const std::vector<int> four = {0, 1, 2, 3};
  auto ts = qwen3vl_timestamps(four, 2.0);
  ASSERT_TRUE(ts.ok()) << ts.message();
  EXPECT_EQ(*ts, (std::vector<double>{0.25, 1.25}));
  // an odd count repeats the last index: [0, 4, 8, 8] at 4 fps
  const std::vector<int> three = {0, 4, 8};
  auto odd = qwen3vl_timestamps(three, 4.0);
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(*odd, (std::vector<double>{0.5, 2.0}));
  // Python's f"{x:.1f}": 0.25 and 1.25 are exact binary ties and round to even
  EXPECT_EQ(qwen3vl_timestamp_text(0.25), "<0.2 seconds>");
  EXPECT_EQ(qwen3vl_timestamp_text(1.25), "<1.2 seconds>");
  EXPECT_EQ(qwen3vl_timestamp_text(2.0), "<2.0 seconds>");
  EXPECT_FALSE(qwen3vl_timestamps(four, 0.0).ok());
  EXPECT_FALSE(qwen3vl_timestamps({}, 2.0).ok());
}

// get_rope_index of Qwen3-VL, rewritten from its description: a video of T pairs is T grids of
// (1, H, W); a vision token of grid g at (r, c) sits at (s, s + r, s + c) with s the position one
// past everything before; a text token at one past everything before.
std::vector<Pos> rope_index(const std::vector<int>& kinds, int H, int W) {  // kind: -1 text, g
  std::vector<Pos> out;
  int32_t next = 0;
  int prev_g = -1, k = 0;
  int32_t s = 0;
  for (int kind : kinds) {
    if (kind < 0) {
      out.push_back(Pos::linear(next++));
      prev_g = -1;
      continue;
    }
    if (kind != prev_g) {  // a new grid starts
      s = next;
      k = 0;
      prev_g = kind;
    }
    out.push_back({s, s + k / W, s + k % W});
    next = std::max(next, s + std::max(H, W));
    ++k;
  }
  return out;
}

TEST(Qwen3VlVideo, PiecesArePlacedAsGetRopeIndex) {
  auto m = tiny::load(tiny::model_path("qwen3vl"));
  ASSERT_TRUE(m && m->tokenizer);
  const int H = 2, W = 3, T = 2, dim = m->cfg.input_width();
  QwenVisionEmbeddings v{T, H, W, dim, std::vector<float>(size_t(T * H * W) * dim)};
  for (size_t i = 0; i < v.rows.size(); ++i) v.rows[i] = float(i % 97) * 0.01f;
  const std::vector<double> ts = {0.25, 1.25};
  auto pieces = qwen3vl_video_pieces(*m->tokenizer, v, ts);
  ASSERT_TRUE(pieces.ok()) << pieces.message();
  ASSERT_EQ(pieces->size(), 5u);  // text, pair, text, pair, text
  const int32_t vs = find_piece(*m->tokenizer, kVisionStart),
                ve = find_piece(*m->tokenizer, kVisionEnd);
  const auto t0 = m->tokenizer->encode_raw("<0.2 seconds>");
  const auto t1 = m->tokenizer->encode_raw("<1.2 seconds>");
  std::vector<int32_t> want0 = t0, want2 = {ve};
  want0.push_back(vs);
  want2.insert(want2.end(), t1.begin(), t1.end());
  want2.push_back(vs);
  EXPECT_EQ((*pieces)[0].tokens, want0);
  EXPECT_EQ((*pieces)[2].tokens, want2);
  EXPECT_EQ((*pieces)[4].tokens, std::vector<int32_t>{ve});
  // each pair: rows of its own slice, t = 0 throughout its layout
  EXPECT_EQ((*pieces)[3].embeddings,
            std::vector<float>(v.rows.begin() + H * W * dim, v.rows.end()));
  for (const Pos& p : (*pieces)[1].layout) EXPECT_EQ(p.t, 0);
  // positions of the whole sequence
  int32_t next = 0;
  const auto placed = place_pieces(*pieces, 0, &next);
  std::vector<Pos> got;
  std::vector<int> kinds;
  for (size_t i = 0; i < pieces->size(); ++i) {
    got.insert(got.end(), placed[i].begin(), placed[i].end());
    for (int r = 0; r < (*pieces)[i].n(); ++r) kinds.push_back(i % 2 == 1 ? int(i) : -1);
  }
  EXPECT_EQ(got, rope_index(kinds, H, W));
  EXPECT_EQ(next, got.back().t + 1);
  QwenVisionEmbeddings bad = v;
  EXPECT_FALSE(qwen3vl_video_pieces(*m->tokenizer, bad, std::vector<double>{0.5}).ok());
}

}  // namespace
