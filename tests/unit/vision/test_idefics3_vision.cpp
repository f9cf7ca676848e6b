// SmolVLM's tower (projector type idefics3) against llama.cpp d32676d's clip, on the committed
// tiny pair of tests/data/idefics3 (written by llama.cpp's gguf-py as its converter writes them).
// The 144 x 96 picture is exactly the processor's refined size in llama.cpp (longest edge 144,
// sides multiples of the 48-pixel tile): llama.cpp cuts it into 3 x 2 tiles without resizing,
// so both sides run the tower on the same pixels. llama.cpp rounds the GELU's input and output
// to f16 (its CPU table); kamera computes it in f32.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "media/image.h"
#include "media/resize.h"
#include "support/gguf_copy.h"
#include "support/idefics3_fixture.h"
#include "support/temp_path.h"
#include "vision/idefics3_encoder.h"

using namespace kamera;
using namespace idefics3_fixture;

TEST(Idefics3Vision, LoadsTheConvertersLayout) {
  auto m = Idefics3VisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const Idefics3VisionConfig& c = m->cfg;
  EXPECT_EQ(c.image_size, 48);
  EXPECT_EQ(c.patch, 4);
  EXPECT_EQ(c.scale, 3);
  EXPECT_EQ(c.longest_edge, 144);
  EXPECT_EQ(c.out_dim, 64);
  EXPECT_EQ(c.tile_rows(), 16);
  EXPECT_FLOAT_EQ(c.eps, 1e-6f);
  // a decoder is not a tower
  auto bad = Idefics3VisionModel::load(kDir + "decoder.gguf");
  EXPECT_FALSE(bad.ok());
}

TEST(Idefics3Vision, TilesMatchLlamaCppClip) {
  auto m = Idefics3VisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  auto img = load_image(kDir + "img_144x96.png");
  ASSERT_TRUE(img.ok()) << img.message();
  std::ifstream jf(kDir + "llama_cpp_144x96.json");
  const auto ref = nlohmann::json::parse(jf);
  const std::vector<float> embd = read_f32(kDir + "llama_cpp_144x96_embd.f32");
  const int dim = ref["n_embd"], t = m->cfg.image_size, rows = m->cfg.tile_rows();
  // llama.cpp's image chunks in prompt order: the 3 x 2 tiles row by row, then the global image
  std::vector<int64_t> offsets;
  for (const auto& c : ref["chunks"])
    if (c.contains("image")) {
      ASSERT_EQ(c["image"].get<int>(), rows);
      offsets.push_back(c["offset"].get<int64_t>());
    }
  ASSERT_EQ(offsets.size(), 7u);
  ThreadPool pool(1);
  Idefics3VisionEncoder enc(*m, &pool);
  double worst = 0;
  for (int r = 0; r < 2; ++r)
    for (int col = 0; col < 3; ++col) {
      auto e = enc.encode(*crop_image(*img, col * t, r * t, t, t));
      ASSERT_TRUE(e.ok()) << e.message();
      ASSERT_EQ(e->size(), size_t(rows) * dim);
      const float* want = embd.data() + offsets[size_t(r * 3 + col)] * dim;
      const double rel = rel_diff(e->data(), want, e->size());
      std::printf("tile (%d, %d): kamera vs llama.cpp %.3e of the largest |value|\n", r + 1,
                  col + 1, rel);
      worst = std::max(worst, rel);
    }
  EXPECT_LT(worst, 2e-3);
  // the check can fail: another tile's rows are far off
  auto e = enc.encode(*crop_image(*img, 0, 0, t, t));
  ASSERT_TRUE(e.ok());
  EXPECT_GT(rel_diff(e->data(), embd.data() + offsets[1] * dim, e->size()), 0.1);
}

TEST(Idefics3Vision, LoaderRefusesWhatItDoesNotRun) {
  const std::string from = kDir + "mmproj.gguf";
  auto refused = [&](const std::function<void(GgufWriter&)>& set,
                     std::vector<std::pair<std::string, std::vector<int64_t>>> extra = {}) {
    const std::string to = unique_temp("kamera-idefics3-bad.gguf");
    tiny::copy_gguf(from, to, set, extra);
    auto m = Idefics3VisionModel::load(to);
    EXPECT_FALSE(m.ok());
    return m.ok() ? std::string() : m.message();
  };
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_u32("clip.vision.projector.scale_factor", 5);
            }).find("do not shuffle by 5"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter& w) { w.set_bool("clip.use_gelu", false); }).find("use_gelu"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_u32("clip.vision.projection_dim", 32);
            }).find("mm.model.fc.weight has shape"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter&) {}, {{"v.pre_ln.weight", {32}}}).find("would ignore"),
            std::string::npos);
  EXPECT_NE(refused([](GgufWriter& w) {
              w.set_string("clip.projector_type", "kimivl");
            }).find("not SmolVLM's"),
            std::string::npos);
  // the same file with f16 matrices loads and computes the same tile within f16's precision
  const std::string f16 = unique_temp("kamera-idefics3-f16.gguf");
  tiny::copy_gguf(
      from, f16, [](GgufWriter&) {}, {}, DType::F16);
  auto a = Idefics3VisionModel::load(from), b = Idefics3VisionModel::load(f16);
  ASSERT_TRUE(a.ok() && b.ok()) << b.message();
  EXPECT_NE(a->fingerprint, b->fingerprint);
  auto img = load_image(kDir + "img_144x96.png");
  ASSERT_TRUE(img.ok());
  const Image tile = *crop_image(*img, 48, 48, 48, 48);
  auto ea = Idefics3VisionEncoder(*a, nullptr).encode(tile);
  auto eb = Idefics3VisionEncoder(*b, nullptr).encode(tile);
  ASSERT_TRUE(ea.ok() && eb.ok());
  const double rel = rel_diff(eb->data(), ea->data(), ea->size());
  EXPECT_GT(rel, 0.0);
  EXPECT_LT(rel, 1e-2);
}
