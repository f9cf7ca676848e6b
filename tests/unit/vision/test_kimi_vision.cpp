// Kimi-VL's MoonViT tower: the processor's steps (native resolution, downscale over the token
// limit, black padding to 28, f32 normalization, patch order), the position table's bicubic
// resize, the interleaved 2-D rope, the mmproj GGUF round trip in every weight type and what the
// loader refuses. The forward against an independent libtorch one (Hugging Face's formulation)
// is ctest KimiVision.EngineMatchesLibtorch*; against llama.cpp's clip: test_kimi_vision_llamacpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "support/gguf_copy.h"
#include "support/temp_path.h"
#include "vision/kimi_vision_encoder.h"

namespace {

using namespace kamera;

KimiVisionConfig tiny_tower() {
  auto c = kimi_vision_preset("tiny");
  EXPECT_TRUE(c.has_value());
  return *c;
}

Image picture(int w, int h, int seed) {
  Image img{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        const double v = 128 + 90 * std::sin(0.21 * x * (c + 1) + 0.13 * y + seed) +
                         30 * std::cos(0.05 * x * y + c);
        img.rgb[(size_t(y) * w + x) * 3 + c] = uint8_t(std::clamp(v, 0.0, 255.0));
      }
  return img;
}

}  // namespace

// Native resolution: an image within the token limit keeps its size and is padded with black to
// multiples of 28; the pixels normalize as to_tensor/normalize do in f32; patches are raster
// order, each (channel, py, px).
TEST(KimiPreprocess, NativeResolutionPaddedToTheMerge) {
  const KimiVisionConfig c = tiny_tower();
  const Image img = picture(61, 30, 1);
  auto p = kimi_preprocess_image(img, c);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->width, 61);
  EXPECT_EQ(p->height, 30);
  EXPECT_EQ(p->grid_w, 6);  // 61 -> 84 = 6 patches
  EXPECT_EQ(p->grid_h, 4);  // 30 -> 56 = 4 patches
  ASSERT_EQ(p->patch_values, 588);
  auto at = [&](int x, int y, int ch) {
    const int gx = x / 14, gy = y / 14;
    return p
        ->values[(size_t(gy) * p->grid_w + gx) * 588 + (size_t(ch) * 14 + y % 14) * 14 + x % 14];
  };
  for (int ch = 0; ch < 3; ++ch) {
    const uint8_t v = img.at(37, 22)[ch];
    EXPECT_EQ(at(37, 22, ch), (float(v) / 255.0f - 0.5f) / 0.5f);
    EXPECT_EQ(at(61, 3, ch), -1.0f);  // padding: black, normalized
    EXPECT_EQ(at(5, 30, ch), -1.0f);
  }
  // a 28-multiple image is not touched
  auto q = kimi_preprocess_image(picture(56, 84, 2), c);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->grid_h, 6);
  EXPECT_EQ(q->grid_w, 4);
}

// Over the limit: scaled by sqrt(limit / patches), each side truncated, then padded.
TEST(KimiPreprocess, DownscalesOverTheTokenLimit) {
  KimiVisionConfig c = tiny_tower();
  c.in_token_limit = 4096;
  auto s = kimi_target_size(1000, 900, c);  // 71 x 64 = 4544 patches
  ASSERT_TRUE(s.ok());
  const double scale = std::sqrt(4096.0 / 4544.0);
  EXPECT_EQ(s->first, int(1000 * scale));
  EXPECT_EQ(s->second, int(900 * scale));
  auto same = kimi_target_size(896, 896, c);  // exactly 4096: kept
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->first, 896);
  c.in_token_limit = 12;
  auto p = kimi_preprocess_image(picture(100, 60, 3), c);  // 7 x 4 = 28 patches > 12
  ASSERT_TRUE(p.ok());
  EXPECT_LE(p->width, 100 * std::sqrt(12.0 / 28.0) + 1);
  EXPECT_EQ(p->grid_w % 2, 0);
  EXPECT_FALSE(kimi_preprocess_image(Image{0, 0, {}}, c).ok());
  c.in_token_limit = 1 << 20;  // the rotary table ends at 512 patches a side
  EXPECT_FALSE(kimi_preprocess_image(picture(14 * 520, 28, 4), c).ok());
}

// The rows from the size alone are the preprocessing's merged tokens, and refuse what it refuses.
TEST(KimiPreprocess, RowsFromTheSizeAloneAreThePreprocessings) {
  KimiVisionConfig c = tiny_tower();
  c.in_token_limit = 64;
  for (const auto& [w, h] :
       std::vector<std::pair<int, int>>{{61, 30}, {56, 84}, {100, 60}, {400, 90}}) {
    auto p = kimi_preprocess_image(picture(w, h, 5), c);
    auto rows = kimi_picture_rows(w, h, c);
    ASSERT_TRUE(p.ok() && rows.ok()) << w << " x " << h;
    EXPECT_EQ(*rows, p->n_patches() / (c.merge * c.merge)) << w << " x " << h;
  }
  c.in_token_limit = 1 << 20;
  EXPECT_FALSE(kimi_picture_rows(14 * 520, 28, c).ok());
}

// The table as is at its own size; a constant table stays constant (the cubic weights sum to 1,
// borders clamp); a resize to 2x agrees with the cubic kernel at the half-pixel offsets.
TEST(KimiVision, PositionTableBicubicResize) {
  const int side = 4, dim = 3;
  std::vector<float> table(size_t(side) * side * dim);
  for (size_t i = 0; i < table.size(); ++i) table[i] = float(i % 7) - 2.5f;
  std::vector<float> out(size_t(side) * side * dim);
  kimi_resize_positions(table.data(), side, dim, side, side, out.data());
  EXPECT_EQ(out, table);
  std::vector<float> flat(table.size(), 0.75f), big(size_t(5) * 9 * dim);
  kimi_resize_positions(flat.data(), side, dim, 5, 9, big.data());
  for (float v : big) EXPECT_NEAR(v, 0.75f, 1e-6);
  // 1-D along x (rows equal): out[x] at source (x + 0.5) / 2 - 0.5
  std::vector<float> ramp(size_t(side) * side * dim);
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x)
      for (int d = 0; d < dim; ++d) ramp[(size_t(y) * side + x) * dim + d] = float(x * x);
  std::vector<float> wide(size_t(side) * 8 * dim);
  kimi_resize_positions(ramp.data(), side, dim, side, 8, wide.data());
  auto k = [](double t) {  // torch's cubic convolution, a = -0.75
    t = std::fabs(t);
    const double a = -0.75;
    return t <= 1  ? ((a + 2) * t - (a + 3)) * t * t + 1
           : t < 2 ? ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
                   : 0.0;
  };
  for (int x = 0; x < 8; ++x) {
    const double src = (x + 0.5) / 2 - 0.5;
    const int i0 = int(std::floor(src));
    double want = 0;
    for (int j = i0 - 1; j <= i0 + 2; ++j) {
      const int jc = std::clamp(j, 0, side - 1);
      want += k(src - j) * double(jc * jc);
    }
    EXPECT_NEAR(wide[size_t(x) * dim], want, 1e-5) << x;
  }
}

// The 2-D rope: pair 2i turns by the column, pair 2i+1 by the row, both at theta^(-4i/hd); a
// score depends on the two patches' offset only.
TEST(KimiVision, RopeInterleavesColumnAndRowPairs) {
  const int hd = 8;  // pairs: (col, f0), (row, f0), (col, f1), (row, f1)
  std::vector<float> x(hd, 0.0f);
  for (int j = 0; j < hd / 2; ++j) x[size_t(2 * j)] = 1.0f;
  const int32_t row = 3, col = 5;
  kimi_rope(x.data(), 1, 1, hd, &row, &col, 10000.0, nullptr);
  const double f1 = std::pow(10000.0, -4.0 / hd);
  EXPECT_NEAR(x[0], std::cos(5.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(5.0), 1e-6);
  EXPECT_NEAR(x[2], std::cos(3.0), 1e-6);
  EXPECT_NEAR(x[3], std::sin(3.0), 1e-6);
  EXPECT_NEAR(x[4], std::cos(5.0 * f1), 1e-6);
  EXPECT_NEAR(x[7], std::sin(3.0 * f1), 1e-6);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  const int d = 16;
  std::vector<float> q(d), k(d);
  for (auto* v : {&q, &k})
    for (float& e : *v) e = u(rng);
  auto score = [&](int32_t r1, int32_t c1, int32_t r2, int32_t c2) {
    std::vector<float> a = q, b = k;
    kimi_rope(a.data(), 1, 1, d, &r1, &c1, 10000.0, nullptr);
    kimi_rope(b.data(), 1, 1, d, &r2, &c2, 10000.0, nullptr);
    double s = 0;
    for (int i = 0; i < d; ++i) s += double(a[size_t(i)]) * b[size_t(i)];
    return s;
  };
  EXPECT_NEAR(score(2, 7, 5, 1), score(12, 17, 15, 11), 1e-5);
  EXPECT_GT(std::fabs(score(2, 7, 5, 1) - score(2, 1, 5, 7)), 1e-3);  // x and y are not swapped
}

// write_gguf then load: the same fingerprint and the same embeddings (F32); F16 and Q8_0 files
// load, keep their matrices in their type and stay close to F32.
TEST(KimiVision, MmprojRoundTripsInEveryType) {
  const KimiVisionModel ref = KimiVisionModel::random(tiny_tower(), 11);
  ThreadPool pool(2);
  auto p = kimi_preprocess_image(picture(70, 42, 5), ref.cfg);  // 6 x 4 patches: interpolated
  ASSERT_TRUE(p.ok());
  auto want = KimiVisionEncoder(ref, &pool).encode(*p);
  ASSERT_TRUE(want.ok()) << want.message();
  EXPECT_EQ(want->grid_h, 2);
  EXPECT_EQ(want->grid_w, 3);
  float scale = 0;
  for (float v : want->rows) scale = std::max(scale, std::fabs(v));
  for (DType t : {DType::F32, DType::F16, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(t));
    const std::string path = unique_temp("kamera-kimi-mmproj.gguf");
    ASSERT_TRUE(ref.write_gguf(path, t).ok());
    auto m = KimiVisionModel::load(path);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ(m->cfg.pos_side, 8);
    EXPECT_EQ(m->cfg.ffn_dim, 96);
    EXPECT_EQ(m->n_parameters(), ref.n_parameters());
    auto got = KimiVisionEncoder(*m, &pool).encode(*p);
    ASSERT_TRUE(got.ok());
    double worst = 0;
    for (size_t i = 0; i < got->rows.size(); ++i)
      worst = std::max(worst, double(std::fabs(got->rows[i] - want->rows[i])));
    if (t == DType::F32) {
      EXPECT_EQ(m->fingerprint, ref.fingerprint);
      EXPECT_EQ(worst, 0.0);
    } else {
      EXPECT_NE(m->fingerprint, ref.fingerprint);
      EXPECT_EQ(m->w.layers[0].q.w.type(), t == DType::F16 ? GgmlType::F16 : GgmlType::Q8_0);
      EXPECT_LT(worst / scale, t == DType::F16 ? 5e-3 : 5e-2);
    }
  }
}

TEST(KimiVision, LoaderRefusesWhatItDoesNotRun) {
  const std::string src = unique_temp("kamera-kimi-src.gguf"), dst = unique_temp("kimi-bad.gguf");
  ASSERT_TRUE(KimiVisionModel::random(tiny_tower(), 3).write_gguf(src, DType::F32).ok());
  struct Case {
    const char* what;
    std::function<void(GgufWriter&)> set;
    std::vector<std::pair<std::string, std::vector<int64_t>>> extra;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"projector",
       [](GgufWriter& w) { w.set_string("clip.projector_type", "kimik25"); },
       {},
       "not Kimi-VL's"},
      {"gelu", [](GgufWriter& w) { w.set_bool("clip.use_gelu", false); }, {}, "use_gelu"},
      {"ffn width",
       [](GgufWriter& w) { w.set_u32("clip.vision.feed_forward_length", 64); },
       {},
       "ffn_up"},
      {"extra tensor", [](GgufWriter&) {}, {{"v.blk.0.attn_q_norm.weight", {16}}}, "ignore"},
      {"heads",
       [](GgufWriter& w) { w.set_u32("clip.vision.attention.head_count", 3); },
       {},
       "heads"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    tiny::copy_gguf(src, dst, c.set, c.extra);
    auto m = KimiVisionModel::load(dst);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.message().find(c.expect), std::string::npos) << m.message();
  }
  tiny::copy_gguf(src, dst, [](GgufWriter&) {});
  EXPECT_TRUE(KimiVisionModel::load(dst).ok());
}

// `kamera make-model --arch kimivl-mmproj` writes KimiVisionModel::random's tower; the a3b preset
// is Kimi-VL-A3B's MoonViT and projector (447.5 M weights).
TEST(KimiVision, MakeModelWritesTheSeededTower) {
  const std::string path = unique_temp("kamera-kimi-make-model.gguf");
  const std::string cmd = std::string(KAMERA_BINARY_DIR) +
                          "/bin/kamera make-model --arch kimivl-mmproj --preset tiny --seed 5 "
                          "--json -o " +
                          path + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto m = KimiVisionModel::load(path);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->fingerprint, KimiVisionModel::random(tiny_tower(), 5).fingerprint);
  KimiVisionModel a3b;
  a3b.cfg = *kimi_vision_preset("a3b");
  EXPECT_EQ(a3b.n_parameters(), 447545840);
  EXPECT_EQ(a3b.cfg.head_dim(), 72);
}
