// Qwen2-VL preprocessing against the Hugging Face processor's steps computed independently with
// python3-pil + numpy (tests/data/qwen_preprocess/make_expected.py): smart_resize sizes, PIL's
// bicubic pixels bit for bit, the normalised and flattened pixel_values bit for bit; frame
// sampling and temporal pairing of video.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "media/image.h"
#include "media/resize.h"
#include "vision/qwen_preprocess.h"

namespace {

using namespace kamera;

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_preprocess/";

std::string fnv1a64(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return fmt::format("{:016x}", h);
}

TEST(QwenPreprocess, SmartResizeAsTransformers) {
  struct Case {
    int h, w;
    int64_t lo, hi;
    int eh, ew;
  };
  const Case cases[] = {
      {47, 61, 3136, 12845056, 56, 56},      // round to the nearest multiple of 28
      {42, 70, 3136, 12845056, 56, 56},      // 1.5 and 2.5 round half to even: 2 and 2
      {98, 126, 3136, 12845056, 112, 112},   // 3.5 -> 4, 4.5 -> 4
      {90, 120, 3136, 4704, 56, 56},         // over max_pixels: floor after scaling
      {30, 20, 3136, 12845056, 84, 56},      // under min_pixels: ceil after scaling
      {448, 448, 3136, 12845056, 448, 448},  // already a multiple
      {1080, 1920, 3136, 1003520, 728, 1316},
  };
  for (const Case& c : cases) {
    auto r = qwen_smart_resize(c.h, c.w, 28, c.lo, c.hi);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->height, c.eh) << c.h << "x" << c.w;
    EXPECT_EQ(r->width, c.ew) << c.h << "x" << c.w;
    EXPECT_LE(int64_t(r->height) * r->width, std::max<int64_t>(c.hi, 28 * 28));
  }
  EXPECT_FALSE(qwen_smart_resize(10, 2500, 28, 3136, 12845056).ok());  // aspect ratio > 200
  EXPECT_FALSE(qwen_smart_resize(0, 50, 28, 3136, 12845056).ok());
}

TEST(QwenPreprocess, MatchesPilAndNumpyBitForBit) {
  std::ifstream f(kDir + "expected.json");
  const auto exp = nlohmann::json::parse(f);
  QwenImageOptions opt;
  for (int c = 0; c < 3; ++c) {
    ASSERT_EQ(opt.mean[size_t(c)], exp["mean"][c].get<float>());
    ASSERT_EQ(opt.std[size_t(c)], exp["std"][c].get<float>());
  }
  for (const auto& c : exp["cases"]) {
    const std::string file = c["file"];
    SCOPED_TRACE(file);
    auto img = load_image(kDir + file);
    ASSERT_TRUE(img.ok()) << img.message();
    opt.min_pixels = c["min_pixels"];
    opt.max_pixels = c["max_pixels"];
    auto size =
        qwen_smart_resize(img->height, img->width, opt.factor(), opt.min_pixels, opt.max_pixels);
    ASSERT_TRUE(size.ok());
    ASSERT_EQ(size->width, c["resized"][0].get<int>());
    ASSERT_EQ(size->height, c["resized"][1].get<int>());
    auto resized = resize_bicubic(*img, size->width, size->height);
    ASSERT_TRUE(resized.ok());
    EXPECT_EQ(fnv1a64(resized->rgb.data(), resized->rgb.size()),
              c["resized_fnv1a64"].get<std::string>())
        << "PIL's bicubic resize gives other pixels";
    auto p = qwen_preprocess_image(*img, opt);
    ASSERT_TRUE(p.ok()) << p.message();
    EXPECT_EQ(p->grid_t, c["grid"][0].get<int>());
    EXPECT_EQ(p->grid_h, c["grid"][1].get<int>());
    EXPECT_EQ(p->grid_w, c["grid"][2].get<int>());
    ASSERT_EQ(p->patch_values, c["patch_values"].get<int>());
    for (const auto& s : c["samples"])
      ASSERT_EQ(p->values[s[0].get<size_t>()], s[1].get<float>()) << "index " << s[0];
    double sum = 0;
    for (float v : p->values) sum += v;
    EXPECT_NEAR(sum, c["patches_sum"].get<double>(), 1e-6 * p->values.size());
    EXPECT_EQ(fnv1a64(p->values.data(), p->values.size() * sizeof(float)),
              c["patches_fnv1a64"].get<std::string>());
  }
}

TEST(QwenPreprocess, FramesArePairedInTimeAndOddCountsRepeatTheLast) {
  // Three 28 x 28 frames of constant colours 10, 20, 30: two temporal patches, the second
  // pairs frame 2 with itself.
  std::vector<Image> frames;
  for (uint8_t v : {10, 20, 30})
    frames.push_back(Image{28, 28, std::vector<uint8_t>(28 * 28 * 3, v)});
  QwenImageOptions opt;
  opt.min_pixels = 28 * 28;
  auto p = qwen_preprocess_frames(frames, opt);
  ASSERT_TRUE(p.ok()) << p.message();
  ASSERT_EQ(p->grid_t, 2);
  ASSERT_EQ(p->grid_h, 2);
  ASSERT_EQ(p->grid_w, 2);
  const int pp = 14 * 14;
  for (int64_t patch = 0; patch < p->n_patches(); ++patch) {
    const int t = int(patch / 4);
    const float* v = p->values.data() + patch * p->patch_values;
    for (int c = 0; c < 3; ++c)
      for (int fr = 0; fr < 2; ++fr) {
        const uint8_t want = t == 0 ? (fr == 0 ? 10 : 20) : 30;
        // values of one patch: (channel, frame, py, px)
        EXPECT_EQ(v[(c * 2 + fr) * pp], qwen_normalize(want, c, opt)) << t << " " << c << " " << fr;
        EXPECT_EQ(v[(c * 2 + fr) * pp + pp - 1], qwen_normalize(want, c, opt));
      }
  }
  // An image is its own pair.
  auto one = qwen_preprocess_image(frames[0], opt);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->grid_t, 1);
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(0, std::memcmp(one->values.data() + (c * 2) * pp,
                             one->values.data() + (c * 2 + 1) * pp, pp * sizeof(float)));
}

// The rows from the sizes alone are the rows the preprocessing gives (an image, a video of an odd
// frame count, a picture over max_pixels, one under min_pixels), and refuse what it refuses.
TEST(QwenPreprocess, RowsFromTheSizeAloneAreThePreprocessings) {
  QwenImageOptions opt;
  opt.max_pixels = 200 * 200;
  for (const auto& [w, h, frames] : std::vector<std::tuple<int, int, int>>{
           {140, 112, 1}, {61, 47, 3}, {500, 300, 1}, {30, 20, 2}, {90, 400, 5}}) {
    std::vector<Image> pics(size_t(frames),
                            Image{w, h, std::vector<uint8_t>(size_t(w) * h * 3, 77)});
    auto p = qwen_preprocess_frames(pics, opt);
    auto rows = qwen_picture_rows(w, h, frames, opt);
    ASSERT_TRUE(p.ok() && rows.ok()) << w << " x " << h;
    EXPECT_EQ(*rows, p->n_patches() / (opt.merge * opt.merge)) << w << " x " << h;
  }
  EXPECT_EQ(*qwen_picture_rows(4000, 4000, 1, QwenImageOptions{}), 16384);  // HF's max_pixels
  EXPECT_FALSE(qwen_picture_rows(20000, 10, 1, opt).ok());                  // aspect over 200
}

TEST(QwenPreprocess, PatchOrderGroupsEachTwoByTwoBlock) {
  // Pixel value encodes its patch: patch (r, c) of a 56 x 84 image has value 10 r + c.
  Image img{84, 56, std::vector<uint8_t>(84 * 56 * 3)};
  for (int y = 0; y < 56; ++y)
    for (int x = 0; x < 84; ++x)
      for (int ch = 0; ch < 3; ++ch)
        img.rgb[(size_t(y) * 84 + x) * 3 + ch] = uint8_t(10 * (y / 14) + x / 14);
  QwenImageOptions opt;
  opt.min_pixels = 28 * 28;
  auto p = qwen_preprocess_image(img, opt);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->grid_h, 4);
  ASSERT_EQ(p->grid_w, 6);
  int i = 0;
  for (int hb = 0; hb < 2; ++hb)
    for (int wb = 0; wb < 3; ++wb)
      for (int dy = 0; dy < 2; ++dy)
        for (int dx = 0; dx < 2; ++dx, ++i) {
          const uint8_t want = uint8_t(10 * (2 * hb + dy) + 2 * wb + dx);
          EXPECT_EQ(p->values[size_t(i) * p->patch_values], qwen_normalize(want, 0, opt));
        }
}

TEST(QwenPreprocess, FrameSamplingAsQwenVlUtils) {
  // 10 s at 30 fps sampled at 2 fps: 20 frames spread over [0, 299].
  auto a = qwen_sample_frames(300, 30.0, 2.0);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 20u);
  EXPECT_EQ(a->front(), 0);
  EXPECT_EQ(a->back(), 299);
  for (size_t i = 1; i < a->size(); ++i) EXPECT_GT((*a)[i], (*a)[i - 1]);
  EXPECT_EQ((*a)[1], 16);  // 299 / 19 = 15.74 -> 16
  // Short clips get at least 4 frames (an even count), never more than there are.
  auto b = qwen_sample_frames(6, 30.0, 2.0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<int>{0, 2, 3, 5}));  // linspace(0, 5, 4) = 0, 1.67, 3.33, 5
  auto c = qwen_sample_frames(5, 1.0, 10.0);      // more requested than exist: 4 (even)
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->size(), 4u);
  auto d = qwen_sample_frames(4, 1.0, 1.0);  // linspace(0, 3, 4)
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(qwen_sample_frames(1, 30.0, 2.0).ok());
  EXPECT_FALSE(qwen_sample_frames(10, 0.0, 2.0).ok());
}

}  // namespace
