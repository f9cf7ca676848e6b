// InternVL's tower (projector type internvl) against llama.cpp d32676d's clip, on the committed
// tiny pair of tests/data/internvl (written by llama.cpp's gguf-py as its converter writes them).
// The 32 x 32 picture is the tower's size, so neither side resizes or cuts it (mtmd makes it one
// tile, no thumbnail) and both run the tower on the same pixels. llama.cpp rounds the GELU's input
// and output to f16 (its CPU table); kamera computes in f32.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "media/image.h"
#include "media/resize.h"
#include "support/idefics3_fixture.h"  // read_f32, rel_diff
#include "vision/internvl_encoder.h"
#include "vision/internvl_preprocess.h"

using namespace kamera;
using idefics3_fixture::read_f32;
using idefics3_fixture::rel_diff;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/internvl/";

std::string fnv1a64(const Image& img) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint8_t b : img.rgb) h = (h ^ b) * 0x100000001B3ull;
  return fmt::format("{:016x}", h);
}

}  // namespace

TEST(InternvlVision, LoadsTheConvertersLayout) {
  auto m = InternvlVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const InternvlVisionConfig& c = m->cfg;
  EXPECT_EQ(c.image_size, 32);
  EXPECT_EQ(c.patch, 4);
  EXPECT_EQ(c.scale, 2);
  EXPECT_EQ(c.rows(), 16);
  EXPECT_EQ(c.merged_dim(), 128);
  EXPECT_EQ(c.out_dim, 64);
  EXPECT_EQ(c.min_tiles, 1);
  EXPECT_EQ(c.max_tiles, 12);
  EXPECT_FLOAT_EQ(c.image_mean[0], 0.485f);
  EXPECT_FLOAT_EQ(c.image_std[2], 0.225f);
  EXPECT_EQ(m->w.pos.size(), size_t(65 * 32));
  EXPECT_FALSE(InternvlVisionModel::load(kDir + "decoder.gguf").ok());  // not a tower
}

TEST(InternvlVision, TileMatchesLlamaCppClip) {
  auto m = InternvlVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  auto img = load_image(kDir + "img_32.png");
  ASSERT_TRUE(img.ok()) << img.message();
  const std::vector<float> embd = read_f32(kDir + "llama_cpp_32_embd.f32");
  ASSERT_EQ(embd.size(), size_t(16 * 64));
  ThreadPool pool(1);
  InternvlVisionEncoder enc(*m, &pool);
  auto e = enc.encode(*img);
  ASSERT_TRUE(e.ok()) << e.message();
  ASSERT_EQ(e->size(), embd.size());
  const double rel = rel_diff(e->data(), embd.data(), e->size());
  std::printf("tile: kamera vs llama.cpp %.3e of the largest |value|\n", rel);
  EXPECT_LT(rel, 2e-3);

  // The check can fail: Hugging Face's placement of the position table (the class token first,
  // pos[0] on it and pos[i + 1] on patch i) is far from llama.cpp's rows on the same weights.
  InternvlVisionModel hf = std::move(*m);
  const size_t d = 32, n = 64;
  std::vector<float> pos(hf.w.pos.size());
  std::copy_n(hf.w.pos.begin() + std::ptrdiff_t(d), n * d, pos.begin());
  std::copy_n(hf.w.pos.begin(), d, pos.begin() + std::ptrdiff_t(n * d));
  hf.w.pos = pos;
  InternvlVisionEncoder hf_enc(hf, &pool);
  auto h = hf_enc.encode(*img);
  ASSERT_TRUE(h.ok()) << h.message();
  const double rel_hf = rel_diff(h->data(), embd.data(), h->size());
  std::printf("tile: Hugging Face's position placement vs llama.cpp %.3e\n", rel_hf);
  EXPECT_GT(rel_hf, 0.05);
}

TEST(InternvlVision, RefusesAPictureOfAnotherSize) {
  auto m = InternvlVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  Image img;
  img.width = img.height = 36;
  img.rgb.assign(36 * 36 * 3, 100);
  InternvlVisionEncoder enc(*m, nullptr);
  EXPECT_FALSE(enc.encode(img).ok());
}

// The tiles against make_pil_tiles.py (the model card's dynamic_preprocess with PIL): the grid,
// and every tile and thumbnail byte for byte, on seven pictures (one tile, 2 x 2 by the tie rule,
// wide, tall, small).
TEST(InternvlVision, TilesArePilDynamicPreprocess) {
  std::ifstream jf(kDir + "pil_tiles.json");
  const auto ref = nlohmann::json::parse(jf);
  auto src = load_image(kDir + ref["source"].get<std::string>());
  ASSERT_TRUE(src.ok()) << src.message();
  auto m = InternvlVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  ASSERT_EQ(m->cfg.image_size, ref["image_size"].get<int>());
  ASSERT_EQ(m->cfg.max_tiles, ref["max_tiles"].get<int>());
  for (const auto& c : ref["cases"]) {
    auto pic = resize_bicubic(*src, c["width"], c["height"]);
    ASSERT_TRUE(pic.ok());
    ASSERT_EQ(fnv1a64(*pic), c["picture"].get<std::string>());
    const InternvlGrid g = internvl_grid(pic->width, pic->height, m->cfg);
    EXPECT_EQ(g.cols, c["cols"].get<int>()) << c["width"] << " x " << c["height"];
    EXPECT_EQ(g.rows, c["rows"].get<int>()) << c["width"] << " x " << c["height"];
    auto tiles = internvl_tiles(*pic, m->cfg);
    ASSERT_TRUE(tiles.ok()) << tiles.message();
    ASSERT_EQ(tiles->size(), c["tiles"].size());
    for (size_t i = 0; i < tiles->size(); ++i)
      EXPECT_EQ(fnv1a64((*tiles)[i]), c["tiles"][i].get<std::string>()) << "tile " << i;
  }
}

// A 64 x 64 picture: 2 x 2 tiles and a thumbnail on both sides (mtmd: five image chunks of 16
// rows between <img> and </img>). The tiles are cut without a resize, so both sides read the same
// pixels: their rows agree as one tile's do, in the same order. The thumbnail is resized (PIL
// BICUBIC here, llama.cpp's own resize there): its rows are reported, not bounded.
TEST(InternvlVision, TilesOfA64PictureMatchLlamaCppInOrder) {
  auto m = InternvlVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  auto img = load_image(kDir + "img_64.png");
  ASSERT_TRUE(img.ok()) << img.message();
  const std::vector<float> embd = read_f32(kDir + "llama_cpp_64_embd.f32");
  ASSERT_EQ(embd.size(), size_t(5 * 16 * 64));
  auto tiles = internvl_tiles(*img, m->cfg);
  ASSERT_TRUE(tiles.ok()) << tiles.message();
  ASSERT_EQ(tiles->size(), 5u);
  InternvlVisionEncoder enc(*m, nullptr);
  const size_t per = 16 * 64;
  for (size_t t = 0; t < tiles->size(); ++t) {
    auto e = enc.encode((*tiles)[t]);
    ASSERT_TRUE(e.ok()) << e.message();
    const double rel = rel_diff(e->data(), embd.data() + t * per, per);
    std::printf("64 x 64, %s %zu: kamera vs llama.cpp %.3e\n", t < 4 ? "tile" : "thumbnail", t,
                rel);
    if (t < 4) {
      EXPECT_LT(rel, 2e-3) << "tile " << t;
    }
  }
}
