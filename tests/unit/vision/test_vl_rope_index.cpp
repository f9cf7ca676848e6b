// Qwen2-VL placement of images in the decoder (vision/rope_index.h) against a line-by-line
// transcription of transformers' Qwen2VLForConditionalGeneration.get_rope_index, and the
// piecewise prefill against one forward of the same rows.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/tiny_models.h"
#include "vision/rope_index.h"

namespace {

using namespace kamera;

constexpr int32_t kVisionStart = 7, kVisionEnd = 8, kImagePad = 9, kVideoPad = 10;
constexpr int kMerge = 2;

struct Thw {
  int t, h, w;  // in patches (HF's image_grid_thw), before the 2 x 2 merge
};

// get_rope_index for one unpadded sequence: 3 rows (t, h, w) of L positions.
std::vector<Pos> hf_get_rope_index(const std::vector<int32_t>& input, std::vector<Thw> images,
                                   std::vector<Thw> videos) {
  int image_nums = 0, video_nums = 0;
  for (size_t i = 0; i + 1 < input.size(); ++i)
    if (input[i] == kVisionStart) {
      image_nums += input[i + 1] == kImagePad;
      video_nums += input[i + 1] == kVideoPad;
    }
  auto index_from = [&](int32_t tok, size_t st) -> size_t {
    auto it = std::find(input.begin() + long(st), input.end(), tok);
    return it == input.end() ? input.size() + 1 : size_t(it - input.begin());
  };
  std::vector<Pos> llm;  // llm_pos_ids_list, concatenated
  auto max_so_far = [&] {
    int32_t m = -1;
    for (const Pos& p : llm) m = std::max({m, p.t, p.h, p.w});
    return m;
  };
  size_t st = 0, image_index = 0, video_index = 0;
  int remain_images = image_nums, remain_videos = video_nums;
  for (int k = 0; k < image_nums + video_nums; ++k) {
    const size_t ed_image = remain_images > 0 ? index_from(kImagePad, st) : input.size() + 1;
    const size_t ed_video = remain_videos > 0 ? index_from(kVideoPad, st) : input.size() + 1;
    Thw g;
    size_t ed;
    if (ed_image < ed_video) {
      g = images[image_index++], remain_images--, ed = ed_image;
    } else {
      g = videos[video_index++], remain_videos--, ed = ed_video;
    }
    const int gt = g.t, gh = g.h / kMerge, gw = g.w / kMerge;
    const int32_t text_len = int32_t(ed - st);
    const int32_t st_idx = llm.empty() ? 0 : max_so_far() + 1;
    for (int32_t i = 0; i < text_len; ++i) llm.push_back(Pos::linear(i + st_idx));
    for (int t = 0; t < gt; ++t)
      for (int h = 0; h < gh; ++h)
        for (int w = 0; w < gw; ++w)
          llm.push_back(Pos{t + text_len + st_idx, h + text_len + st_idx, w + text_len + st_idx});
    st = ed + size_t(gt) * gh * gw;
  }
  if (st < input.size()) {
    const int32_t st_idx = llm.empty() ? 0 : max_so_far() + 1;
    for (size_t i = 0; i < input.size() - st; ++i) llm.push_back(Pos::linear(int32_t(i) + st_idx));
  }
  return llm;
}

// The same sequence as kamera's pieces: text runs and one image chunk per pad run.
std::vector<Pos> kamera_positions(const std::vector<int32_t>& input, const std::vector<Thw>& grids,
                                  int32_t* next) {
  std::vector<ChunkContent> pieces;
  std::vector<int32_t> text;
  size_t g = 0;
  for (size_t i = 0; i < input.size();) {
    if (input[i] != kImagePad && input[i] != kVideoPad) {
      text.push_back(input[i++]);
      continue;
    }
    if (!text.empty()) pieces.push_back(ChunkContent::from_tokens(std::exchange(text, {})));
    QwenVisionEmbeddings e;
    e.grid_t = grids[g].t, e.grid_h = grids[g].h / kMerge, e.grid_w = grids[g].w / kMerge;
    ++g;
    e.dim = 1;
    e.rows.assign(size_t(e.n_rows()), 0.0f);
    i += size_t(e.n_rows());
    pieces.push_back(image_chunk(std::move(e)));
  }
  if (!text.empty()) pieces.push_back(ChunkContent::from_tokens(text));
  std::vector<Pos> flat;
  for (const auto& p : place_pieces(pieces, 0, next)) flat.insert(flat.end(), p.begin(), p.end());
  return flat;
}

std::vector<int32_t> image_tokens(int32_t pad, Thw g, std::vector<int32_t> before = {},
                                  std::vector<int32_t> after = {}) {
  std::vector<int32_t> v = std::move(before);
  v.push_back(kVisionStart);
  v.insert(v.end(), size_t(g.t) * (g.h / kMerge) * (g.w / kMerge), pad);
  v.push_back(kVisionEnd);
  v.insert(v.end(), after.begin(), after.end());
  return v;
}

TEST(VlPlacement, MatchesGetRopeIndex) {
  struct Case {
    const char* name;
    std::vector<int32_t> input;
    std::vector<Thw> images, videos, order;  // order: the grids as they appear
  };
  std::vector<Case> cases;
  cases.push_back(
      {"image alone", image_tokens(kImagePad, {1, 4, 6}), {{1, 4, 6}}, {}, {{1, 4, 6}}});
  cases.push_back({"text + image + text",
                   image_tokens(kImagePad, {1, 6, 4}, {1, 2, 3}, {4, 5}),
                   {{1, 6, 4}},
                   {},
                   {{1, 6, 4}}});
  {
    auto a = image_tokens(kImagePad, {1, 4, 4}, {1});
    auto b = image_tokens(kImagePad, {1, 2, 8}, {}, {2, 3});
    a.insert(a.end(), b.begin(), b.end());
    cases.push_back({"two images", a, {{1, 4, 4}, {1, 2, 8}}, {}, {{1, 4, 4}, {1, 2, 8}}});
  }
  cases.push_back({"video, 2 temporal patches",
                   image_tokens(kVideoPad, {2, 4, 6}, {1, 2}, {3}),
                   {},
                   {{2, 4, 6}},
                   {{2, 4, 6}}});
  {
    auto a = image_tokens(kVideoPad, {3, 2, 2}, {5});
    auto b = image_tokens(kImagePad, {1, 8, 2}, {6}, {4});
    a.insert(a.end(), b.begin(), b.end());
    cases.push_back({"video then image", a, {{1, 8, 2}}, {{3, 2, 2}}, {{3, 2, 2}, {1, 8, 2}}});
  }
  for (const Case& c : cases) {
    const std::vector<Pos> want = hf_get_rope_index(c.input, c.images, c.videos);
    int32_t next = 0;
    const std::vector<Pos> got = kamera_positions(c.input, c.order, &next);
    ASSERT_EQ(got.size(), c.input.size()) << c.name;
    ASSERT_EQ(want.size(), c.input.size()) << c.name;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(got[i] == want[i])
          << c.name << " token " << i << ": kamera (" << got[i].t << "," << got[i].h << ","
          << got[i].w << ") HF (" << want[i].t << "," << want[i].h << "," << want[i].w << ")";
    int32_t m = -1;
    for (const Pos& p : want) m = std::max({m, p.t, p.h, p.w});
    EXPECT_EQ(next, m + 1) << c.name << ": the next token's position";
  }
}

TEST(VlPlacement, PiecewisePrefillEqualsOneForward) {
  auto m = tiny::load(tiny::model_path("qwen2vl"));
  ASSERT_TRUE(m);
  const int D = m->cfg.dim;
  // [4 text tokens][image 2 x 3 x 4 whose rows are token embeddings][3 text tokens]
  const auto before = tiny::random_tokens(4, m->cfg.n_vocab, 1);
  const auto as_image = tiny::random_tokens(24, m->cfg.n_vocab, 2);
  const auto after = tiny::random_tokens(3, m->cfg.n_vocab, 3);
  QwenVisionEmbeddings e{2, 3, 4, D, {}};
  for (int32_t id : as_image) {
    e.rows.resize(e.rows.size() + size_t(D));
    m->tok_embd.rows_f32(id, 1, e.rows.data() + e.rows.size() - size_t(D));
  }
  const std::vector<ChunkContent> pieces{ChunkContent::from_tokens(before), image_chunk(e),
                                         ChunkContent::from_tokens(after)};
  auto pool = tiny::pool_for(*m, 64);
  Engine engine(*m, 2);
  const SeqId s = pool->create_sequence();
  int32_t next = 0;
  auto got = prefill_pieces(engine, *pool, s, pieces, 0, LogitsMode::Last, &next);
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(next, 4 + 4 + 3);  // the image spans max(2, 3, 4) positions
  EXPECT_EQ(pool->n_tokens(s), 4 + 24 + 3);

  std::vector<int32_t> ids = before;
  ids.insert(ids.end(), as_image.begin(), as_image.end());
  ids.insert(ids.end(), after.begin(), after.end());
  std::vector<Pos> pos;
  for (const auto& p : place_pieces(pieces, 0)) pos.insert(pos.end(), p.begin(), p.end());
  const SeqId s2 = pool->create_sequence();
  auto want = engine.forward(*pool, s2, ForwardInput::from_tokens(ids, pos));
  ASSERT_TRUE(want.ok()) << want.message();
  EXPECT_LT(tiny::max_abs_diff(*got, *want), 1e-5);

  // a mismatched width is refused before any forward
  QwenVisionEmbeddings narrow{1, 1, 2, D - 1, std::vector<float>(size_t(2 * (D - 1)))};
  const std::vector<ChunkContent> bad{image_chunk(narrow)};
  const SeqId s3 = pool->create_sequence();
  auto r = prefill_pieces(engine, *pool, s3, bad, 0, LogitsMode::Last);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(pool->n_tokens(s3), 0);
}

}  // namespace
