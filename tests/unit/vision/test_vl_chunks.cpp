// Images as position-free chunks (vision/image_chunks.h) in the reuse layer, on a tiny Qwen2-VL
// tower and decoder and on a tiny Qwen3-VL pair (interleaved M-RoPE; each image row carries its
// deepstack slices, added after the decoder's first layers): the image key, encode-once,
// relocation by delta on t, h and w against a fresh prefill at the shifted positions (the first
// layer's keys bit for bit), a full-rank patch that rebuilds the KV of the image conditioned on
// text before it, and a window of frames that slides as a re-prefill.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "cache/chunk_cache.h"
#include "core/thread_pool.h"
#include "reuse/patch.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "vision/image_chunks.h"
#include "window/window.h"

namespace {

using namespace kamera;

Image picture(int w, int h, int seed) {
  Image img{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        img.rgb[(size_t(y) * w + x) * 3 + c] =
            uint8_t(128 + 100 * std::sin(0.19 * x * (c + 1) + 0.11 * y + seed));
  return img;
}

// The decoder and the tower of one family.
class VlFamily : public testing::TestWithParam<const char*> {};

struct VlRig {
  std::unique_ptr<Context> ctx;
  QwenVisionModel tower;
  ThreadPool threads{2};
  std::unique_ptr<ImageChunks> images;

  explicit VlRig(const std::string& arch = VlFamily::GetParam()) {
    ctx = tiny::context(tiny::model_path(arch), 2000, 16, size_t(1) << 28);
    const std::string path = unique_temp("kamera-vl-chunks-tower.gguf");
    EXPECT_TRUE(QwenVisionModel::random(*qwen_vision_preset(arch, "tiny"), 1)
                    .write_gguf(path, DType::F32)
                    .ok());
    auto t = QwenVisionModel::load(path);
    EXPECT_TRUE(t.ok()) << t.message();
    std::filesystem::remove(path);
    tower = std::move(*t);
    EXPECT_TRUE(check_qwen_pair(tower.cfg, ctx->model().cfg, "tower").ok());
    // Qwen3-VL's processor would stretch these small pictures to 65536 pixels: keep its floor at
    // one merged token, so both families cut the same pictures into the same grids
    tower.cfg.min_pixels = int64_t(tower.cfg.patch) * tower.cfg.patch * 4;
    images = std::make_unique<ImageChunks>(tower, ctx->model().fingerprint, &threads);
  }
  ChunkCache& cache() { return ctx->cache(); }
  KvPool& pool() { return ctx->pool(); }
};

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

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

TEST_P(VlFamily, ImageKeyAndEncodeOnce) {
  VlRig rig;
  const Image a = picture(84, 56, 1), b = picture(84, 56, 2);
  bool encoded = false;
  auto ca = rig.images->image(a, &encoded);
  ASSERT_TRUE(ca.ok()) << ca.message();
  EXPECT_TRUE(encoded);
  EXPECT_EQ((*ca)->n(), 3 * 2);  // 84 x 56 -> 6 x 4 patches -> 3 x 2 merged
  EXPECT_EQ((*ca)->extent(), 3);
  auto again = rig.images->image(a, &encoded);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(encoded);
  EXPECT_EQ(again->get(), ca->get());
  EXPECT_EQ(rig.images->stats().encodes, 1);
  EXPECT_EQ(rig.images->stats().hits, 1);
  ASSERT_TRUE(rig.images->image(b, &encoded).ok());
  EXPECT_TRUE(encoded);

  // the key follows pixels, preprocessing and both models, nothing else
  const QwenImageOptions& opt = rig.images->options();
  const auto fp = rig.ctx->model().fingerprint;
  const ChunkId k = image_key({&a, 1}, opt, rig.tower.fingerprint, fp);
  EXPECT_EQ(k, image_key({&a, 1}, opt, rig.tower.fingerprint, fp));
  Image a1 = a;
  a1.rgb[1000] ^= 1;
  EXPECT_NE(k, image_key({&a1, 1}, opt, rig.tower.fingerprint, fp));
  QwenImageOptions opt2 = opt;
  opt2.max_pixels /= 2;
  EXPECT_NE(k, image_key({&a, 1}, opt2, rig.tower.fingerprint, fp));
  EXPECT_NE(k, image_key({&a, 1}, opt, rig.tower.fingerprint, {fp[0] ^ 1, fp[1]}));
  EXPECT_NE(k, image_key({&a, 1}, opt, {rig.tower.fingerprint[0], ~rig.tower.fingerprint[1]}, fp));
}

// A video: 4 frames pair into 2 temporal patches; t advances once per pair, the key covers every
// frame, and the chunk is cached like an image.
TEST_P(VlFamily, VideoFramesPairInTime) {
  VlRig rig;
  std::vector<Image> frames;
  for (int f = 0; f < 4; ++f) frames.push_back(picture(56, 112, 10 + f));
  bool encoded = false;
  if (rig.tower.cfg.qwen3()) {  // pairs with timestamps between (vision/qwen3vl_video.h)
    auto v = rig.images->frames(frames, &encoded);
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.code(), ErrorCode::Unsupported);
    EXPECT_FALSE(encoded);
    auto pair = rig.images->frames(std::span<const Image>(frames.data(), 2), &encoded);
    ASSERT_TRUE(pair.ok()) << pair.message();
    EXPECT_EQ((*pair)->n(), 8);  // one pair: 4 x 2 rows at t = 0
    return;
  }
  auto v = rig.images->frames(frames, &encoded);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_TRUE(encoded);
  const ChunkContent& c = **v;  // 2 x (4 x 2) rows
  ASSERT_EQ(c.n(), 16);
  for (int i = 0; i < c.n(); ++i) {
    EXPECT_EQ(c.layout[size_t(i)].t, i / 8);
    EXPECT_EQ(c.layout[size_t(i)].h, (i % 8) / 2);
    EXPECT_EQ(c.layout[size_t(i)].w, i % 2);
  }
  EXPECT_EQ(c.extent(), 4);  // max(T = 2, H = 4, W = 2)
  ASSERT_TRUE(rig.images->frames(frames, &encoded).ok());
  EXPECT_FALSE(encoded);
  frames.pop_back();  // 3 frames: the last is repeated to fill the pair, a different key
  ASSERT_TRUE(rig.images->frames(frames, &encoded).ok());
  EXPECT_TRUE(encoded);
}

// Relocation: the canonical KV(image | anchor), formed with the anchor at 0 and the image at 1,
// served with everything moved by delta (anchor at delta, image at delta + 1: t, h and w all
// shifted) equals a fresh prefill at the shifted positions: the image's KV rows and the logits of
// a question after it.
TEST_P(VlFamily, RelocatedImageEqualsFreshPrefill) {
  VlRig rig;
  const Image a = picture(112, 84, 3);
  auto img = rig.images->image(a);
  ASSERT_TRUE(img.ok()) << img.message();
  const ChunkContent& B = **img;  // 4 x 3 merged rows, extent 4
  const auto& cfg = rig.ctx->model().cfg;
  const ChunkContent Q = tiny::random_chunk(5, cfg.n_vocab, 9);
  const ChunkContent anchor = ChunkContent::from_tokens(rig.cache().anchor());
  auto canon = rig.cache().canonical(B);
  ASSERT_TRUE(canon.ok()) << canon.message();
  const int n_anchor = anchor.n();
  for (int delta : {0, 7, 120}) {
    SCOPED_TRACE(delta);
    const int32_t p = anchor.extent() + delta;  // the image's start
    ScopedSequence served(rig.pool()), fresh(rig.pool());
    ASSERT_TRUE(rig.cache().forward_chunk(served.id(), anchor, delta).ok());
    ASSERT_TRUE(rig.cache().append_chunk(served.id(), **canon, nullptr, p).ok());
    auto ls = rig.cache().forward_chunk(served.id(), Q, p + B.extent(), LogitsMode::All);
    ASSERT_TRUE(ls.ok()) << ls.message();
    ASSERT_TRUE(rig.cache().forward_chunk(fresh.id(), anchor, delta).ok());
    ASSERT_TRUE(rig.cache().forward_chunk(fresh.id(), B, p).ok());
    auto lf = rig.cache().forward_chunk(fresh.id(), Q, p + B.extent(), LogitsMode::All);
    ASSERT_TRUE(lf.ok()) << lf.message();
    const ChunkKV kv_s = read_chunk_kv(rig.pool(), served.id(), n_anchor, B.n());
    const ChunkKV kv_f = read_chunk_kv(rig.pool(), fresh.id(), n_anchor, B.n());
    EXPECT_LT(max_rel_kv(kv_s, kv_f), 1e-5);
    EXPECT_LT(tiny::max_abs_diff(*ls, *lf), 1e-5 * std::max(1.0, max_abs(*lf)));
    // the first layer's rows depend on the image rows alone (keys stored before the rotation)
    for (int ch = 0; ch < 2; ++ch) {
      std::vector<float> x(size_t(kv_f.at(0, ch).cols())), y(x.size());
      for (int i = 0; i < B.n(); ++i) {
        kv_s.at(0, ch).get_row(i, x.data());
        kv_f.at(0, ch).get_row(i, y.data());
        ASSERT_EQ(x, y) << "layer 0, channel " << ch << ", row " << i;
      }
    }
  }
  // Served instead behind an anchor left at 0, the image at 1 + delta is off: relative positions
  // matter, and the check above can see a wrong one.
  ScopedSequence gap(rig.pool()), fresh(rig.pool());
  ASSERT_TRUE(rig.cache().forward_chunk(gap.id(), anchor, 0).ok());
  ASSERT_TRUE(rig.cache().forward_chunk(gap.id(), B, anchor.extent() + 7).ok());
  ASSERT_TRUE(rig.cache().forward_chunk(fresh.id(), anchor, 0).ok());
  ASSERT_TRUE(rig.cache().forward_chunk(fresh.id(), B, anchor.extent()).ok());
  EXPECT_GT(max_rel_kv(read_chunk_kv(rig.pool(), gap.id(), n_anchor, B.n()),
                       read_chunk_kv(rig.pool(), fresh.id(), n_anchor, B.n())),
            1e-3);
}

TEST_P(VlFamily, FullRankPatchRebuildsConditionedImageKv) {
  VlRig rig;
  const auto& cfg = rig.ctx->model().cfg;
  auto img = rig.images->image(picture(84, 84, 4));
  ASSERT_TRUE(img.ok()) << img.message();
  const ChunkContent A = tiny::random_chunk(12, cfg.n_vocab, 5), B = **img;
  const ChunkContent Q = tiny::random_chunk(4, cfg.n_vocab, 6);
  auto canon = rig.cache().canonical(B);
  ASSERT_TRUE(canon.ok()) << canon.message();
  const std::vector<ChunkContent> ab = {A, B};
  auto cond = rig.cache().conditioned(ab);
  ASSERT_TRUE(cond.ok()) << cond.message();
  PatchOptions po;
  po.rank = kFullRank;
  po.cap_rank = true;
  auto patch = form_patch((*cond)[1], (*canon)->kv, po);
  ASSERT_TRUE(patch.ok()) << patch.message();
  ChunkKV rebuilt = (*canon)->kv;
  const double blind = max_rel_kv(rebuilt, (*cond)[1]);
  apply_patch(*patch, rebuilt);
  const double patched = max_rel_kv(rebuilt, (*cond)[1]);
  EXPECT_LT(patched, 1e-5);
  EXPECT_GT(blind, 1e-3);  // the text before the image does change its KV

  // served end to end: [anchor][A][B] with B's full-rank patch vs a re-prefill
  auto serve = [&](ServePolicy policy) {
    ServeOptions o;
    o.policy = policy;
    o.patch.rank = kFullRank;
    o.patch.cap_rank = true;
    ScopedSequence s(rig.pool());
    auto r = rig.cache().assemble(s.id(), ab, o);
    EXPECT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->next_position, rig.cache().anchor_extent() + A.extent() + B.extent());
    auto l = rig.cache().forward_chunk(s.id(), Q, r->next_position, LogitsMode::All);
    EXPECT_TRUE(l.ok()) << l.message();
    return *l;
  };
  const auto ref = serve(ServePolicy::Reprefill), got = serve(ServePolicy::Patch);
  EXPECT_LT(tiny::max_abs_diff(got, ref), 1e-4 * std::max(1.0, max_abs(ref)));
}

// Window operations on frames: admitted at full rank, a window of three frames answers as a
// re-prefill does; after a slide (the oldest frame evicted, survivors moved by its extent on t, h
// and w) and a refresh of the survivors' patches on their new antecedents, it answers as a
// re-prefill of the two frames at their new positions.
TEST_P(VlFamily, WindowOfFramesSlidesLikeAReprefill) {
  VlRig rig;
  std::vector<ChunkContent> f;
  for (int i = 0; i < 3; ++i) {
    auto c = rig.images->image(picture(84, 56 + 28 * i, 20 + i));
    ASSERT_TRUE(c.ok()) << c.message();
    f.push_back(**c);
  }
  const ChunkContent Q = tiny::random_chunk(4, rig.ctx->model().cfg.n_vocab, 7);
  auto reprefill = [&](const std::vector<ChunkContent>& chunks) {
    ScopedSequence s(rig.pool());
    ServeOptions o;
    o.policy = ServePolicy::Reprefill;
    auto r = rig.cache().assemble(s.id(), chunks, o);
    EXPECT_TRUE(r.ok()) << r.message();
    return *rig.cache().forward_chunk(s.id(), Q, r->next_position, LogitsMode::All);
  };
  WindowPolicy p;
  p.rank = kFullRank;
  auto w = Window::create(*rig.ctx, p);
  ASSERT_TRUE(w.ok()) << w.message();
  for (const ChunkContent& c : f) ASSERT_TRUE((*w)->admit_back(c).ok());
  auto got = (*w)->query(Q);
  ASSERT_TRUE(got.ok()) << got.message();
  const auto want = reprefill(f);
  EXPECT_LT(tiny::max_abs_diff(*got, want), 1e-4 * std::max(1.0, max_abs(want)));

  ASSERT_TRUE((*w)->evict_front().ok());
  const std::vector<int> stale = (*w)->stale_slots();
  EXPECT_FALSE(stale.empty());  // the survivors were conditioned on the evicted frame
  for (int slot : stale) ASSERT_TRUE((*w)->refresh(slot).ok());
  ASSERT_TRUE((*w)->check_invariants().ok());
  auto slid = (*w)->query(Q);
  ASSERT_TRUE(slid.ok()) << slid.message();
  const auto want2 = reprefill({f[1], f[2]});
  EXPECT_LT(tiny::max_abs_diff(*slid, want2), 1e-4 * std::max(1.0, max_abs(want2)));
  EXPECT_GT(tiny::max_abs_diff(*slid, want), 1e-3);  // the slide did change the answer
}

INSTANTIATE_TEST_SUITE_P(VlChunks, VlFamily, testing::Values("qwen2vl", "qwen3vl"));

// The deepstack slices are part of an image chunk's content: its id, and the KV it leaves from
// the second layer on (the first layer reads slice 0 alone).
TEST(VlChunks, DeepstackSlicesAreTheImageChunksContent) {
  VlRig rig("qwen3vl");
  auto img = rig.images->image(picture(84, 56, 5));
  ASSERT_TRUE(img.ok()) << img.message();
  const ChunkContent& B = **img;
  const ModelConfig& c = rig.ctx->model().cfg;
  ASSERT_EQ(c.n_deepstack, 2);
  ASSERT_EQ(B.dim, 3 * c.dim);
  ChunkContent flat = B;  // the same rows without their deepstack slices
  for (int i = 0; i < B.n(); ++i)
    std::fill_n(flat.embeddings.begin() + size_t(i) * B.dim + c.dim, 2 * c.dim, 0.0f);
  const auto fp = rig.ctx->model().fingerprint;
  EXPECT_NE(chunk_id(fp, B).hex(), chunk_id(fp, flat).hex());
  auto a = rig.cache().canonical(B), b = rig.cache().canonical(flat);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int layer = 0; layer < c.n_layers; ++layer) {
    double d = 0;
    std::vector<float> x(size_t(c.kv_width())), y(x.size());
    for (int i = 0; i < B.n(); ++i) {
      (*a)->kv.at(layer, 0).get_row(i, x.data());
      (*b)->kv.at(layer, 0).get_row(i, y.data());
      for (size_t j = 0; j < x.size(); ++j) d = std::max(d, double(std::fabs(x[j] - y[j])));
    }
    if (layer == 0)
      EXPECT_EQ(d, 0.0);
    else
      EXPECT_GT(d, 1e-3) << "layer " << layer;
  }
}

}  // namespace
