// Qwen2.5-VL's video time scaling (vision/video_time.h) against a transcription of Hugging Face's
// get_rope_index for video (float32 tensors, .long()), written separately here as the tensor ops
// are: range -> expand -> * second_per_grid_t -> * tokens_per_second -> long -> + start.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "vision/rope_index.h"
#include "vision/video_time.h"

namespace {

using namespace kamera;

// HF, for one video of grid (t, h, w) (already merged) starting at st_idx, as (t, h, w) rows.
std::vector<Pos> hf_video_positions(int grid_t, int grid_h, int grid_w, float second_per_grid_t,
                                    int tokens_per_second, int st_idx) {
  std::vector<float> time_tensor;  // expanded_range * second_per_grid_t * tokens_per_second
  for (int64_t i = 0; i < grid_t; ++i)
    for (int j = 0; j < grid_h * grid_w; ++j) {
      float x = float(i) * second_per_grid_t;
      x = x * float(tokens_per_second);
      time_tensor.push_back(x);
    }
  std::vector<Pos> out;
  size_t n = 0;
  for (int i = 0; i < grid_t; ++i)
    for (int y = 0; y < grid_h; ++y)
      for (int x = 0; x < grid_w; ++x)
        out.push_back(
            Pos{int32_t(static_cast<int64_t>(time_tensor[n++])) + st_idx, y + st_idx, x + st_idx});
  return out;
}

QwenVisionEmbeddings video(int t, int h, int w) {
  QwenVisionEmbeddings e;
  e.grid_t = t;
  e.grid_h = h;
  e.grid_w = w;
  e.dim = 4;
  e.rows.assign(size_t(e.n_rows()) * 4, 0.5f);
  return e;
}

TEST(VideoTime, MatchesTheTransformersFormula) {
  for (double fps : {0.5, 1.0, 2.0, 3.0, 4.0, 7.0, 24.0})
    for (int tps : {1, 2, 4})
      for (auto [t, h, w] : {std::array{5, 2, 3}, std::array{12, 1, 1}, std::array{1, 3, 2}}) {
        const VideoTime vt = VideoTime::from_fps(fps, 2, tps);
        auto c = video_chunk(video(t, h, w), vt);
        ASSERT_TRUE(c.ok()) << c.message();
        const int start = 17;
        const auto got = c->positions_at(start);
        const auto want = hf_video_positions(t, h, w, float(2.0 / fps), tps, start);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_TRUE(got[i].t == want[i].t && got[i].h == want[i].h && got[i].w == want[i].w)
              << "fps " << fps << " tps " << tps << " row " << i << ": t " << got[i].t << " vs "
              << want[i].t;
      }
}

TEST(VideoTime, KnownValuesAndTheTextAfter) {
  // 2 fps sampling: a temporal patch spans 1 s, 2 tokens per second: t = 0, 2, 4, 6
  EXPECT_EQ(video_t(3, VideoTime::from_fps(2.0)), 6);
  // 3 fps: 2/3 s per patch: t = trunc(k * 4/3) = 0, 1, 2, 4, 5
  std::vector<int32_t> t;
  for (int k = 0; k < 5; ++k) t.push_back(video_t(k, VideoTime::from_fps(3.0)));
  EXPECT_EQ(t, (std::vector<int32_t>{0, 1, 2, 4, 5}));
  // text after the video continues at max(t, h, w) + 1 (rope_index.h): here t dominates
  auto c = video_chunk(video(4, 2, 2), VideoTime::from_fps(2.0));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->extent(), 7);
  // Qwen2-VL's unscaled layout is the special case second_per_grid_t * tokens_per_second = 1
  auto q2 = video_chunk(video(3, 2, 2), VideoTime{0.5, 2.0});
  ASSERT_TRUE(q2.ok());
  EXPECT_EQ(q2->layout, image_chunk(video(3, 2, 2)).layout);
  EXPECT_FALSE(video_chunk(video(2, 1, 1), VideoTime{0.0, 2.0}).ok());
  EXPECT_FALSE(video_chunk(video(2, 1, 1), VideoTime{1e9, 2.0}).ok());
}

}  // namespace
