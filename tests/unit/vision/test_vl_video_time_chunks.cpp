// Qwen2.5-VL's time scaling wired into image chunks (vision/image_chunks.h, vision/video_time.h):
// a 4-frame video (2 temporal slices) through a tiny random Qwen2.5-VL tower at 2 and at 1 frames
// per second lands at the t transformers' get_rope_index gives (t = k * tokens_per_second *
// temporal_patch / fps: 0, 2 at 2 fps; 0, 4 at 1 fps), written here from the formula, not from
// video_time.h; its canonical KV relocated into place equals a fresh prefill of the same rows at
// those positions; one encode serves every rate; a Qwen2-VL tower keeps t = slice index whatever
// the rate.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "cache/chunk_cache.h"
#include "core/thread_pool.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "support/video_frames.h"
#include "vision/image_chunks.h"

namespace {

using namespace kamera;
using video_frames::frame;

QwenVisionModel tower(const std::string& arch, uint64_t seed) {
  const std::string path = unique_temp("kamera-vl-video-time-") + arch + ".gguf";
  EXPECT_TRUE(QwenVisionModel::random(*qwen_vision_preset(arch, "tiny"), seed)
                  .write_gguf(path, DType::F32)
                  .ok());
  auto t = QwenVisionModel::load(path);
  EXPECT_TRUE(t.ok()) << t.message();
  std::filesystem::remove(path);
  return std::move(*t);
}

std::vector<Image> video() {
  std::vector<Image> f;
  for (int i = 0; i < 4; ++i) f.push_back(frame(56, 84, 30 + i));  // 4 x 6 patches: 2 x 3 merged
  return f;
}

std::vector<Pos> hf_video_layout(int slices, int h, int w, double fps) {
  return video_frames::hf_layout(slices, h, w, fps);
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

double max_rel_kv(const ChunkKV& got, const ChunkKV& want) {
  double worst = 0;
  for (size_t b = 0; b < want.blocks.size(); ++b) {
    std::vector<float> x(want.blocks[b].cols()), y(x.size());
    double num = 0, den = 0;
    for (int i = 0; i < want.n_tokens; ++i) {
      got.blocks[b].get_row(i, x.data());
      want.blocks[b].get_row(i, y.data());
      for (size_t j = 0; j < x.size(); ++j)
        num = std::max(num, double(std::fabs(x[j] - y[j]))),
        den = std::max(den, double(std::fabs(y[j])));
    }
    worst = std::max(worst, num / std::max(den, 1e-30));
  }
  return worst;
}

TEST(VlVideoTime, Qwen25VideoChunksFollowGetRopeIndexAndRelocate) {
  auto ctx = tiny::context(tiny::model_path("qwen2vl"), 2000, 16, size_t(1) << 28);
  const QwenVisionModel t25 = tower("qwen25vl", 7);
  ASSERT_EQ(t25.cfg.out_dim, ctx->model().cfg.dim);
  ThreadPool threads(2);
  ImageChunks images(t25, ctx->model().fingerprint, &threads);
  ASSERT_TRUE(images.time_scaled());
  const std::vector<Image> frames = video();
  const ChunkContent anchor = ChunkContent::from_tokens(ctx->cache().anchor());
  const ChunkContent Q = tiny::random_chunk(5, ctx->model().cfg.n_vocab, 11);
  std::vector<float> first_rows;
  for (double fps : {2.0, 1.0}) {
    SCOPED_TRACE(fps);
    bool encoded = false;
    auto v = images.frames(frames, &encoded, fps);
    ASSERT_TRUE(v.ok()) << v.message();
    EXPECT_EQ(encoded, fps == 2.0);  // the second rate reuses the first rate's encode
    const ChunkContent& B = **v;
    const std::vector<Pos> want = hf_video_layout(2, 3, 2, fps);
    ASSERT_EQ(B.n(), int(want.size()));
    EXPECT_EQ(B.layout, want);
    EXPECT_EQ(B.layout.back().t, fps == 2.0 ? 2 : 4);
    EXPECT_EQ(B.extent(), fps == 2.0 ? 3 : 5);  // text after: max position + 1
    if (first_rows.empty()) first_rows = B.embeddings;
    EXPECT_EQ(B.embeddings, first_rows);  // the rows do not depend on the rate

    // the rows at the formula's positions, prefilled fresh, against the canonical relocated
    ChunkContent fresh_B;
    fresh_B.dim = B.dim;
    fresh_B.embeddings = B.embeddings;
    fresh_B.layout = want;
    auto canon = ctx->cache().canonical(B);
    ASSERT_TRUE(canon.ok()) << canon.message();
    for (int delta : {0, 9}) {
      SCOPED_TRACE(delta);
      const int32_t p = anchor.extent() + delta;
      ScopedSequence served(ctx->pool()), fresh(ctx->pool());
      ASSERT_TRUE(ctx->cache().forward_chunk(served.id(), anchor, delta).ok());
      ASSERT_TRUE(ctx->cache().append_chunk(served.id(), **canon, nullptr, p).ok());
      auto ls = ctx->cache().forward_chunk(served.id(), Q, p + B.extent(), LogitsMode::All);
      ASSERT_TRUE(ls.ok()) << ls.message();
      ASSERT_TRUE(ctx->cache().forward_chunk(fresh.id(), anchor, delta).ok());
      ASSERT_TRUE(ctx->cache().forward_chunk(fresh.id(), fresh_B, p).ok());
      auto lf = ctx->cache().forward_chunk(fresh.id(), Q, p + 1 + want.back().t, LogitsMode::All);
      ASSERT_TRUE(lf.ok()) << lf.message();
      const int n_anchor = anchor.n();
      EXPECT_LT(max_rel_kv(read_chunk_kv(ctx->pool(), served.id(), n_anchor, B.n()),
                           read_chunk_kv(ctx->pool(), fresh.id(), n_anchor, B.n())),
                1e-5);
      EXPECT_LT(tiny::max_abs_diff(*ls, *lf), 1e-5 * std::max(1.0, max_abs(*lf)));
    }
  }
  // the two rates are different chunks (different positions), so their KV cannot be confused
  auto a = images.frames(frames, nullptr, 2.0), b = images.frames(frames, nullptr, 1.0);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(chunk_id(ctx->model().fingerprint, **a), chunk_id(ctx->model().fingerprint, **b));
  // the default rate is the processor's (2 fps); a single image is not scaled
  auto d = images.frames(frames);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->layout, hf_video_layout(2, 3, 2, 2.0));
  auto one = images.image(frames[0]);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)->layout, hf_video_layout(1, 3, 2, 2.0));
  EXPECT_EQ(images.stats().encodes, 2);  // the video once, the image once
  EXPECT_FALSE(images.frames(frames, nullptr, -1).ok());
  EXPECT_FALSE(images.frames(frames, nullptr, std::nan("")).ok());
}

TEST(VlVideoTime, Qwen2TowerKeepsSliceIndex) {
  auto ctx = tiny::context(tiny::model_path("qwen2vl"), 500, 16, size_t(1) << 26);
  const QwenVisionModel t2 = tower("qwen2vl", 8);
  ThreadPool threads(1);
  ImageChunks images(t2, ctx->model().fingerprint, &threads);
  EXPECT_FALSE(images.time_scaled());
  for (double fps : {0.5, 1.0, 2.0, 8.0}) {
    auto v = images.frames(video(), nullptr, fps);
    ASSERT_TRUE(v.ok()) << v.message();
    ASSERT_EQ((*v)->n(), 12);
    for (int i = 0; i < 12; ++i) EXPECT_EQ((*v)->layout[size_t(i)].t, i / 6);
  }
  EXPECT_EQ(images.stats().encodes, 1);
}

// Through a store: the embeddings stored once are read back by another ImageChunks (a restart),
// which retimes them for its own rate without running the tower.
TEST(VlVideoTime, StoredVideoIsRetimedWithoutEncoding) {
  auto ctx = tiny::context(tiny::model_path("qwen2vl"), 500, 16, size_t(1) << 26);
  const QwenVisionModel t25 = tower("qwen25vl", 9);
  ThreadPool threads(1);
  ImageChunks first(t25, ctx->model().fingerprint, &threads);
  first.set_store(&ctx->store());
  auto a = first.frames(video(), nullptr, 2.0);
  ASSERT_TRUE(a.ok()) << a.message();
  ImageChunks second(t25, ctx->model().fingerprint, &threads);
  second.set_store(&ctx->store());
  bool encoded = true;
  auto b = second.frames(video(), &encoded, 0.5);
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_FALSE(encoded);
  EXPECT_EQ(second.stats().encodes, 0);
  EXPECT_EQ(second.stats().store_hits, 1);
  EXPECT_EQ((*b)->layout, hf_video_layout(2, 3, 2, 0.5));  // t = 0, 8
  EXPECT_EQ((*b)->embeddings, (*a)->embeddings);
}

}  // namespace
