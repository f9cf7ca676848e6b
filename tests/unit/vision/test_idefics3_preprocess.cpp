// SmolVLM's preprocessing and prompt layout (vision/idefics3_preprocess.h): the tiles against an
// independent reference written from Hugging Face's Idefics3ImageProcessor with PIL
// (tests/data/idefics3/make_hf_reference.py), and the layout against llama.cpp d32676d's mtmd on
// the committed tiny pair (tests/data/idefics3/README.md): the same tokens around the tiles, and
// every image chunk's rows, the global image's too once kamera's tower reads llama.cpp's
// overview pixels (llama.cpp resizes it bilinearly, the processor with Lanczos).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "media/image.h"
#include "support/idefics3_fixture.h"
#include "tokenizer/gguf_import.h"
#include "vision/idefics3_encoder.h"
#include "vision/idefics3_preprocess.h"

using namespace kamera;
using namespace idefics3_fixture;

namespace {

std::string fnv1a64(const void* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return fmt::format("{:016x}", h);
}

// make_hf_reference.py's drawn(): channel c of (x, y) is
// (x^2 (3 + c) + y (11 + seed) + x y (5 + c + seed)) mod 256.
Image drawn(int w, int h, int seed) {
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.resize(size_t(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        img.rgb[(size_t(y) * w + x) * 3 + c] =
            uint8_t((int64_t(x) * x * (3 + c) + int64_t(y) * (11 + seed) +
                     int64_t(x) * y * (5 + c + seed)) %
                    256);
  return img;
}

Idefics3VisionConfig tiny_config() {
  Idefics3VisionConfig c;
  c.image_size = 48;
  c.patch = 4;
  c.scale = 3;
  c.longest_edge = 144;
  return c;
}

}  // namespace

TEST(Idefics3Preprocess, TilesMatchTheHfProcessor) {
  std::ifstream f(kDir + "hf_reference.json");
  ASSERT_TRUE(f) << "missing tests/data/idefics3/hf_reference.json";
  const auto ref = nlohmann::json::parse(f);
  const Idefics3VisionConfig c = tiny_config();
  ASSERT_EQ(ref["tile"].get<int>(), c.image_size);
  ASSERT_EQ(ref["longest_edge"].get<int>(), c.longest_edge);
  int checked = 0;
  for (const auto& cs : ref["cases"]) {
    const std::string name = cs["name"];
    Image img;
    if (cs.contains("pixels")) {
      img = drawn(cs["size"][0], cs["size"][1], name.back() - '0');
      ASSERT_EQ(fnv1a64(img.rgb.data(), img.rgb.size()), cs["pixels"].get<std::string>()) << name;
    } else {
      auto l = load_image(kDir + name);
      ASSERT_TRUE(l.ok()) << l.message();
      img = std::move(*l);
    }
    auto g = idefics3_grid(img.width, img.height, c);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->width, cs["step2"][0].get<int>()) << name;
    EXPECT_EQ(g->height, cs["step2"][1].get<int>()) << name;
    EXPECT_EQ(g->rows, cs["rows"].get<int>()) << name;
    EXPECT_EQ(g->cols, cs["cols"].get<int>()) << name;
    auto t = idefics3_preprocess(img, c);
    ASSERT_TRUE(t.ok()) << t.message();
    ASSERT_EQ(t->tiles.size(), cs["tiles"].size()) << name;
    for (size_t i = 0; i < t->tiles.size(); ++i) {
      ASSERT_EQ(t->tiles[i].width, c.image_size);
      EXPECT_EQ(fnv1a64(t->tiles[i].rgb.data(), t->tiles[i].rgb.size()),
                cs["tiles"][i].get<std::string>())
          << name << " tile " << i;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 35);
}

TEST(Idefics3Preprocess, LayoutAndRowsMatchLlamaCppMtmd) {
  auto gf = GgufFile::open(kDir + "decoder.gguf");
  ASSERT_TRUE(gf.ok()) << gf.message();
  auto tok = tokenizer_from_gguf(**gf);
  ASSERT_TRUE(tok.ok()) << tok.message();
  auto vocab = idefics3_vocab(*tok);
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  EXPECT_EQ(vocab->max_side, 6);
  auto m = Idefics3VisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  auto img = load_image(kDir + "img_144x96.png");
  ASSERT_TRUE(img.ok());
  auto tiles = idefics3_preprocess(*img, m->cfg);
  ASSERT_TRUE(tiles.ok());
  auto layout = idefics3_layout(tiles->grid, *vocab);
  ASSERT_TRUE(layout.ok()) << layout.message();

  // llama.cpp's prompt "<|im_start|>User:<__media__>the<end_of_utterance>": its chunks flattened
  // to pieces, tokens and image chunks (-1 - chunk index); the picture starts at the first
  // <fake_token_around_image> and ends at the one after the last image chunk
  std::ifstream jf(kDir + "llama_cpp_144x96.json");
  const auto ref = nlohmann::json::parse(jf);
  std::vector<int32_t> theirs;
  std::vector<int64_t> offsets;
  for (const auto& c : ref["chunks"]) {
    if (c.contains("image")) {
      theirs.push_back(-1 - int32_t(offsets.size()));
      offsets.push_back(c["offset"].get<int64_t>());
    } else {
      for (int32_t t : c["text"]) theirs.push_back(t);
    }
  }
  const auto first = std::find(theirs.begin(), theirs.end(), vocab->fake);
  const auto last_image = std::find(theirs.begin(), theirs.end(), -int32_t(offsets.size()));
  ASSERT_NE(first, theirs.end());
  ASSERT_NE(last_image, theirs.end());
  const std::vector<int32_t> picture(first, last_image + 2);
  std::vector<int32_t> ours;
  for (const Idefics3Piece& p : *layout) ours.push_back(p.tile >= 0 ? -1 - p.tile : p.token);
  EXPECT_EQ(ours, picture);
  EXPECT_EQ(idefics3_layout_rows(*layout, m->cfg), 7 * 16 + 17);  // 6 tiles and the global

  // every image chunk's rows: tiles as kamera cuts them, the global image from llama.cpp's
  // overview pixels; kamera's own global image (Lanczos) is another picture
  const std::vector<float> embd = read_f32(kDir + "llama_cpp_144x96_embd.f32");
  const int dim = ref["n_embd"], rows = m->cfg.tile_rows();
  ThreadPool pool(1);
  Idefics3VisionEncoder enc(*m, &pool);
  ASSERT_EQ(tiles->tiles.size(), offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i) {
    const bool global = i + 1 == offsets.size();
    auto e = enc.encode(global ? bilinear_corners(*img, 48, 48) : tiles->tiles[i]);
    ASSERT_TRUE(e.ok()) << e.message();
    const double rel = rel_diff(e->data(), embd.data() + offsets[i] * dim, size_t(rows) * dim);
    EXPECT_LT(rel, 2e-3) << "image chunk " << i;
    if (global) {
      auto own = enc.encode(tiles->tiles[i]);
      ASSERT_TRUE(own.ok());
      const double off = rel_diff(own->data(), embd.data() + offsets[i] * dim, own->size());
      std::printf("global image: llama.cpp's pixels %.3e, the processor's (Lanczos) %.3e\n", rel,
                  off);
      EXPECT_GT(off, 10 * rel);
    }
  }
}
