// The mini-VL vision encoder: its mmproj-style GGUF round-trips exactly, bad files are refused
// with the file named, and a frame becomes a chunk with the (0, row, col) layout the decoder's
// M-RoPE expects.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "minivl/minivl.h"
#include "support/temp_path.h"
#include "vision/encoder.h"
#include "vision/frame_chunk.h"

namespace {

using namespace kamera;

TEST(Vision, GgufRoundTripIsExactAndEncodingDeterministic) {
  const VisionModel m = VisionModel::random(minivl::vision_config(), 3);
  const std::string path = unique_temp("kamera-vision-rt.gguf");
  ASSERT_TRUE(m.write_gguf(path).ok());
  auto back = VisionModel::load(path);
  ASSERT_TRUE(back.ok()) << back.message();
  VisionModel a = m, b = *back;
  auto ta = a.tensors(), tb = b.tensors();
  ASSERT_EQ(ta.size(), tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    EXPECT_EQ(ta[i].name, tb[i].name);
    EXPECT_EQ(*ta[i].data, *tb[i].data) << ta[i].name;
  }
  const minivl::Clip clip = minivl::make_clip(minivl::Split::Test, 5);
  VisionEncoder e1(a), e2(b);
  std::vector<float> o1, o2;
  ASSERT_TRUE(e1.encode(clip.frames[0].rgb.data(), &o1).ok());
  ASSERT_TRUE(e2.encode(clip.frames[0].rgb.data(), &o2).ok());
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(o1.size(), size_t(a.cfg.n_tokens()) * a.cfg.out_dim);
  // Different frames give different tokens.
  ASSERT_TRUE(e1.encode(clip.frames[1].rgb.data(), &o2).ok());
  EXPECT_NE(o1, o2);
  std::filesystem::remove(path);
}

TEST(Vision, RefusesFilesThatAreNotAnEncoderNamingThem) {
  const std::string dec = unique_temp("kamera-vision-dec.gguf");
  const std::string vis = unique_temp("kamera-vision-vis.gguf");
  ASSERT_TRUE(minivl::write_random_minivl(dec, vis, 1).ok());
  auto r = VisionModel::load(dec);  // a decoder, not an encoder
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find(dec), std::string::npos) << r.message();
  auto swapped = minivl::MiniVl::load(vis, dec);
  EXPECT_FALSE(swapped.ok());
  auto ok = minivl::MiniVl::load(dec, vis);
  EXPECT_TRUE(ok.ok()) << ok.message();
  VisionConfig bad = minivl::vision_config();
  bad.patch = 5;  // 32 is not a multiple of 5
  EXPECT_FALSE(bad.validate().ok());
  std::filesystem::remove(dec);
  std::filesystem::remove(vis);
}

TEST(Vision, PatchOrderIsRowMajorPixelsThenChannels) {
  VisionConfig c = minivl::vision_config();
  std::vector<uint8_t> rgb(size_t(c.image_size) * c.image_size * 3, 0);
  // One white pixel at (y, x) = (9, 18): patch (1, 2) of the 8-pixel grid, (py, px) = (1, 2).
  for (int ch = 0; ch < 3; ++ch) rgb[(size_t(9) * c.image_size + 18) * 3 + ch] = 255;
  std::vector<float> p(size_t(c.n_patches()) * c.patch_values());
  VisionEncoder::patchify(c, rgb.data(), p.data());
  const int patch = 1 * c.grid() + 2, inner = (1 * c.patch + 2) * 3;
  int ones = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 1.0f) {
      ++ones;
      EXPECT_EQ(int(i / c.patch_values()), patch);
      EXPECT_GE(int(i % c.patch_values()), inner);
      EXPECT_LT(int(i % c.patch_values()), inner + 3);
    } else {
      EXPECT_EQ(p[i], -1.0f);
    }
  }
  EXPECT_EQ(ones, 3);
}

TEST(Vision, FrameChunkHasAGridLayoutWhoseExtentIsTheTokenGrid) {
  const VisionModel m = VisionModel::random(minivl::vision_config(), 4);
  VisionEncoder enc(m);
  const minivl::Clip clip = minivl::make_clip(minivl::Split::Test, 1);
  auto ch = frame_chunk(enc, clip.frames[2].rgb);
  ASSERT_TRUE(ch.ok()) << ch.message();
  const int g = m.cfg.token_grid();
  ASSERT_EQ(ch->n(), g * g);
  EXPECT_EQ(ch->extent(), g);
  EXPECT_EQ(ch->layout[size_t(g + 1)], (Pos{0, 1, 1}));
  EXPECT_EQ(minivl::frame_start(3, g), 1 + 3 * g);
  minivl::Frame bad;
  bad.rgb.resize(10);
  EXPECT_FALSE(frame_chunk(enc, bad.rgb).ok());
}

}  // namespace

#include "eval/minivl_eval.h"
#include "support/eval_json.h"

namespace {

using namespace kamera;

constexpr auto find_arm = testing_support::minivl_arm;

// On random weights (exactness, not accuracy): the full-rank patch equals re-prefill, blind does
// not, every arm answers every question, and the rank-capped arms agree with full rank.
TEST(MiniVlEval, FullRankPatchEqualsReprefillOnEveryQuestion) {
  const std::string dec = unique_temp("kamera-mve-dec.gguf");
  const std::string vis = unique_temp("kamera-mve-vis.gguf");
  ASSERT_TRUE(minivl::write_random_minivl(dec, vis, 9).ok());
  auto mv = minivl::MiniVl::load(dec, vis);
  ASSERT_TRUE(mv.ok()) << mv.message();
  MiniVlEvalOptions o;
  o.n_clips = 4;
  o.ranks = {1, 64, -1};
  auto ctx = Context::create(mv->decoder, minivl_eval_context(*mv, o, 1));
  ASSERT_TRUE(ctx.ok()) << ctx.message();
  auto r = run_minivl_eval(*mv, **ctx, o);
  ASSERT_TRUE(r.ok()) << r.message();
  const int q = (*r)["questions"].get<int>();
  EXPECT_GE(q, 4 * 4);  // up to 3 per family per clip, when the clip offers that many
  EXPECT_LE(q, 4 * 6);
  for (const auto& a : (*r)["arms"]) EXPECT_EQ(a["by_family"]["all"]["questions"].get<int>(), q);
  const auto& full = find_arm(*r, "patch", "rank=full")["by_family"]["all"];
  const auto& r64 = find_arm(*r, "patch", "rank=64")["by_family"]["all"];
  const auto& r1 = find_arm(*r, "patch", "rank=1")["by_family"]["all"];
  const auto& blind = find_arm(*r, "blind", "")["by_family"]["all"];
  EXPECT_LT(full["kl"].get<double>(), 1e-9);
  EXPECT_EQ(full["agree_reprefill"].get<double>(), 1.0);
  EXPECT_EQ(r64["kl"].get<double>(), full["kl"].get<double>());  // capped at the frame's rank
  EXPECT_GT(blind["kl"].get<double>(), 1e-5);
  EXPECT_GT(r1["kl"].get<double>(), full["kl"].get<double>());
  EXPECT_LT(r1["kl"].get<double>(), blind["kl"].get<double>());
  std::filesystem::remove(dec);
  std::filesystem::remove(vis);
}

}  // namespace
