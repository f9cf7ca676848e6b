// Gemma 3's tower (projector type gemma3) against llama.cpp d32676d's clip, on the committed tiny
// pair of tests/data/gemma3 (written by llama.cpp's gguf-py as its converter writes them). The
// 64 x 64 picture is the tower's size, so neither side resizes it and both run the tower on the
// same pixels. llama.cpp rounds the GELU's input and output to f16 (its CPU table) and, the
// projection being f16 in the file, the normed rows to f16 before it; kamera computes in f32.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "media/image.h"
#include "media/resize.h"
#include "support/gemma3_fixture.h"
#include "support/gguf_copy.h"
#include "support/temp_path.h"
#include "vision/gemma3_encoder.h"

using namespace kamera;
using namespace gemma3_fixture;

namespace {

std::string fnv1a64(const void* data, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return fmt::format("{:016x}", h);
}

}  // namespace

TEST(Gemma3Vision, LoadsTheConvertersLayout) {
  auto m = Gemma3VisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const Gemma3VisionConfig& c = m->cfg;
  EXPECT_EQ(c.image_size, 64);
  EXPECT_EQ(c.patch, 4);
  EXPECT_EQ(c.pool, 4);  // no scale_factor key: the converter's default
  EXPECT_EQ(c.rows(), 16);
  EXPECT_EQ(c.out_dim, 64);
  EXPECT_FLOAT_EQ(c.eps, 1e-6f);
  EXPECT_FALSE(Gemma3VisionModel::load(kDir + "decoder.gguf").ok());  // not a tower
}

TEST(Gemma3Vision, PictureMatchesLlamaCppClip) {
  auto m = Gemma3VisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  auto img = load_image(kDir + "img_64.png");
  ASSERT_TRUE(img.ok()) << img.message();
  const std::vector<float> embd = read_f32(kDir + "llama_cpp_64_embd.f32");
  ASSERT_EQ(embd.size(), size_t(16 * 64));
  ThreadPool pool(1);
  Gemma3VisionEncoder enc(*m, &pool);
  auto e = enc.encode(*img);
  ASSERT_TRUE(e.ok()) << e.message();
  ASSERT_EQ(e->size(), embd.size());
  const double rel = rel_diff(e->data(), embd.data(), e->size());
  std::printf("picture: kamera vs llama.cpp %.3e of the largest |value|\n", rel);
  EXPECT_LT(rel, 2e-3);
  // the check can fail: the rows of a transposed pooling are far off
  std::vector<float> t(e->size());
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x)
      std::copy_n(e->data() + size_t(x * 4 + y) * 64, 64, t.data() + size_t(y * 4 + x) * 64);
  EXPECT_GT(rel_diff(t.data(), embd.data(), t.size()), 0.1);
}

TEST(Gemma3Vision, ResizeIsPilBilinear) {
  std::ifstream jf(kDir + "pil_bilinear.json");
  const auto ref = nlohmann::json::parse(jf);
  auto img = load_image(kDir + ref["source"].get<std::string>());
  ASSERT_TRUE(img.ok());
  auto m = Gemma3VisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok());
  for (const auto& c : ref["cases"]) {
    auto out = resize_bilinear(*img, c["width"], c["height"]);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(fnv1a64(out->rgb.data(), out->rgb.size()), c["pixels"].get<std::string>())
        << c.dump();
    auto back = gemma3_picture(*out, m->cfg);  // what the tower reads of that picture
    ASSERT_TRUE(back.ok());
    ASSERT_EQ(back->width, 64);
    EXPECT_EQ(fnv1a64(back->rgb.data(), back->rgb.size()), c["back_to_64"].get<std::string>())
        << c.dump();
  }
  auto same = gemma3_picture(*img, m->cfg);  // the tower's size: as it is
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->rgb, img->rgb);
}

TEST(Gemma3Vision, LoaderRefusesWhatItDoesNotRun) {
  const std::string from = kDir + "mmproj.gguf";
  auto refused = [&](const std::function<void(GgufWriter&)>& set,
                     std::vector<std::pair<std::string, std::vector<int64_t>>> extra = {}) {
    const std::string to = unique_temp("kamera-gemma3-bad.gguf");
    tiny::copy_gguf(from, to, set, extra);
    auto m = Gemma3VisionModel::load(to);
    EXPECT_FALSE(m.ok());
    return m.ok() ? std::string() : m.message();
  };
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_u32("clip.vision.projector.scale_factor", 3);
            }).find("do not pool by 3"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter& w) { w.set_bool("clip.use_gelu", false); }).find("use_gelu"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_u32("clip.vision.projection_dim", 32);
            }).find("mm.input_projection.weight has shape"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter&) {}, {{"v.pre_ln.weight", {32}}}).find("would ignore"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_string("clip.projector_type", "idefics3");
            }).find("not Gemma 3's"),
            std::string::npos);
  // the pooling factor the file names is the one used: 2 gives 8 x 8 rows
  const std::string two = unique_temp("kamera-gemma3-pool2.gguf");
  tiny::copy_gguf(from, two,
                  [](GgufWriter& w) { w.set_u32("clip.vision.projector.scale_factor", 2); });
  auto m = Gemma3VisionModel::load(two);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->cfg.rows(), 64);
}
