// Video through Qwen2.5-Omni's vision half (audio/audio_tower.h's OmniTower over the committed
// tiny pair, tests/data/qwen25o). llama.cpp d32676d's mtmd has no Omni video timing (it merges two
// consecutive same-size pictures into one chunk whose rows all sit at t = its start), so the
// reference is Hugging Face's get_rope_index for Qwen2.5-Omni, written here from its formula (t of
// slice k = trunc(f32(k * second_per_grid) * 25), second_per_grid = temporal_patch / fps), and
// kamera's own Qwen2.5-VL path given the same tensors (the file's vision half loaded as a
// Qwen2.5-VL tower): the same rows, h and w, only t scaled by 25 instead of 2. The video's
// canonical KV relocated into place equals a fresh prefill of its rows at those positions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "audio/audio_tower.h"
#include "cache/chunk_cache.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "support/tiny_models.h"
#include "support/video_frames.h"
#include "vision/image_chunks.h"

using namespace kamera;
using video_frames::frame;
using video_frames::hf_layout;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen25o/";

// 4 frames of 56 x 84 (sides multiples of 28: not resized): 2 temporal slices of 3 x 2 merged rows
std::vector<Image> video() {
  std::vector<Image> f;
  for (int i = 0; i < 4; ++i) f.push_back(frame(56, 84, 40 + i));
  return f;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

}  // namespace

TEST(OmniVideo, FramesFollowOmniGetRopeIndexAndMatchTheQwen25VlPath) {
  auto ctx = tiny::context(kDir + "decoder.gguf", 600, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(ctx);
  auto tower = load_media_tower(kDir + "mmproj.gguf", ctx->model(), 1, nullptr);
  ASSERT_TRUE(tower.ok()) << tower.message();
  ASSERT_TRUE((*tower)->takes_video());
  ASSERT_TRUE((*tower)->takes_audio());
  const std::vector<Image> frames = video();
  const std::vector<ImageSize> sizes(4, ImageSize{56, 84});
  EXPECT_EQ(*(*tower)->rows(sizes), 12);
  // the same tensors as a Qwen2.5-VL tower (t scaled by its 2 tokens a second)
  auto vl = QwenVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(vl.ok()) << vl.message();
  ThreadPool pool(1);
  ImageChunks vl_images(*vl, ctx->model().fingerprint, &pool);
  for (double fps : {2.0, 4.0, 0.5}) {
    SCOPED_TRACE(fps);
    bool encoded = false;
    auto v = (*tower)->chunk(frames, &encoded, fps, {});
    ASSERT_TRUE(v.ok()) << v.message();
    EXPECT_EQ(encoded, fps == 2.0);  // one encode serves every rate
    const ChunkContent& B = **v;
    const std::vector<Pos> want = hf_layout(2, 3, 2, fps, 25.0f);
    EXPECT_EQ(B.layout, want);
    EXPECT_EQ(B.layout.back().t, fps == 2.0 ? 25 : fps == 4.0 ? 12 : 100);
    EXPECT_EQ(B.extent(), B.layout.back().t + 1);  // text after: the largest position + 1
    auto ref = vl_images.frames(frames, nullptr, fps);
    ASSERT_TRUE(ref.ok()) << ref.message();
    EXPECT_EQ((*ref)->layout, hf_layout(2, 3, 2, fps, 2.0f));
    EXPECT_EQ(B.embeddings, (*ref)->embeddings);  // the same rows, bit for bit
  }
  // one picture is not timed (t = 0 for its one slice), as before
  auto one = (*tower)->chunk(std::span(&frames[0], 1), nullptr, 0, {});
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_EQ((*one)->layout, hf_layout(1, 3, 2, 2.0, 25.0f));
}

TEST(OmniVideo, TimedVideoRelocatesExactly) {
  auto ctx = tiny::context(kDir + "decoder.gguf", 800, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(ctx);
  auto tower = load_media_tower(kDir + "mmproj.gguf", ctx->model(), 1, nullptr);
  ASSERT_TRUE(tower.ok()) << tower.message();
  auto v = (*tower)->chunk(video(), nullptr, 1.0, {});  // t = 0, 50
  ASSERT_TRUE(v.ok()) << v.message();
  const ChunkContent& B = **v;
  ASSERT_EQ(B.layout.back().t, 50);
  const ChunkContent anchor = ChunkContent::from_tokens(ctx->cache().anchor());
  const ChunkContent Q = tiny::random_chunk(5, ctx->model().cfg.n_vocab, 13);
  auto canon = ctx->cache().canonical(B);
  ASSERT_TRUE(canon.ok()) << canon.message();
  for (int delta : {0, 7, 120}) {
    SCOPED_TRACE(delta);
    const int32_t p = anchor.extent() + delta;
    ScopedSequence served(ctx->pool()), fresh(ctx->pool());
    ASSERT_TRUE(ctx->cache().forward_chunk(served.id(), anchor, delta).ok());
    ASSERT_TRUE(ctx->cache().append_chunk(served.id(), **canon, nullptr, p).ok());
    auto ls = ctx->cache().forward_chunk(served.id(), Q, p + B.extent(), LogitsMode::All);
    ASSERT_TRUE(ls.ok()) << ls.message();
    ASSERT_TRUE(ctx->cache().forward_chunk(fresh.id(), anchor, delta).ok());
    ASSERT_TRUE(ctx->cache().forward_chunk(fresh.id(), B, p).ok());
    auto lf = ctx->cache().forward_chunk(fresh.id(), Q, p + 51, LogitsMode::All);
    ASSERT_TRUE(lf.ok()) << lf.message();
    const double d = tiny::max_abs_diff(*ls, *lf);
    std::printf("Omni video at +%d: relocated vs fresh logits %.3e of %.3e\n", delta, d,
                max_abs(*lf));
    EXPECT_LT(d, 1e-5 * std::max(1.0, max_abs(*lf)));
  }
}
