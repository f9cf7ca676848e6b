// LLaVA-1.5's tower (projector type mlp) against llama.cpp d32676d's clip, on the committed tiny
// pair of tests/data/llava (written by llama.cpp's gguf-py as its legacy converter writes them).
// The 32 x 32 picture is the tower's size, so neither side pads or resizes it and both run the
// tower on the same pixels. llama.cpp rounds GELU's input and output to f16 (its CPU table);
// kamera computes in f32.
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "media/image.h"
#include "support/idefics3_fixture.h"  // read_f32, rel_diff
#include "vision/llava_encoder.h"

using namespace kamera;
using idefics3_fixture::read_f32;
using idefics3_fixture::rel_diff;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/llava/";

}  // namespace

TEST(LlavaVision, LoadsTheLegacyConvertersLayout) {
  auto m = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const LlavaVisionConfig& c = m->cfg;
  EXPECT_EQ(c.image_size, 32);
  EXPECT_EQ(c.patch, 4);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.layers, 2);  // clip.vision.feature_layer = [2]: the checkpoint's penultimate state
  EXPECT_EQ(c.rows(), 64);
  EXPECT_EQ(c.out_dim, 64);
  EXPECT_FALSE(c.gelu_tanh);  // quick-GELU
  EXPECT_FALSE(c.fc1_is_up);  // mlp.fc1 under the converter's name ffn_down
  EXPECT_FLOAT_EQ(c.eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.image_mean[0], 0.48145466f);
  EXPECT_FLOAT_EQ(c.image_std[2], 0.27577711f);
  EXPECT_EQ(m->w.pos.size(), size_t(65 * 32));
  EXPECT_FALSE(LlavaVisionModel::load(kDir + "decoder.gguf").ok());  // not a tower
}

TEST(LlavaVision, PictureMatchesLlamaCppClip) {
  auto m = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  auto img = load_image(kDir + "img_32.png");
  ASSERT_TRUE(img.ok()) << img.message();
  const std::vector<float> embd = read_f32(kDir + "llama_cpp_32_embd.f32");
  ASSERT_EQ(embd.size(), size_t(64 * 64));
  ThreadPool pool(1);
  LlavaVisionEncoder enc(*m, &pool);
  auto e = enc.encode(*img);
  ASSERT_TRUE(e.ok()) << e.message();
  ASSERT_EQ(e->size(), embd.size());
  const double rel = rel_diff(e->data(), embd.data(), e->size());
  std::printf("picture: kamera vs llama.cpp %.3e of the largest |value|\n", rel);
  EXPECT_LT(rel, 2e-3);

  // The check can fail: Hugging Face's order (the class token first with pos[0], the 64 patch
  // rows kept) is far from llama.cpp's rows on the same weights.
  LlavaVisionEncoder hf(*m, &pool, LlavaClassOrder::kHuggingFace);
  auto h = hf.encode(*img);
  ASSERT_TRUE(h.ok()) << h.message();
  const double rel_hf = rel_diff(h->data(), embd.data(), h->size());
  std::printf("picture: Hugging Face's class-token order vs llama.cpp %.3e\n", rel_hf);
  EXPECT_GT(rel_hf, 0.05);
}

TEST(LlavaVision, RefusesAPictureOfAnotherSize) {
  auto m = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  Image img;
  img.width = img.height = 36;
  img.rgb.assign(36 * 36 * 3, 100);
  LlavaVisionEncoder enc(*m, nullptr);
  EXPECT_FALSE(enc.encode(img).ok());
}
