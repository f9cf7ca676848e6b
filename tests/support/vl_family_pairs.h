// The committed tiny pairs of the vision families the server reads beside their decoders
// (tests/data/<family>: SmolVLM, Gemma 3, InternVL, LLaVA-1.5; random weights written by
// llama.cpp's gguf-py), and one picture of each through the server's tower (vision/media_tower.h),
// for the table-driven tests of the other entry points.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "media/image.h"
#include "support/tiny_models.h"
#include "vision/media_tower.h"

namespace vl_family_pairs {

struct Family {
  const char* name;   // tests/data/<name>
  const char* image;  // a picture of that folder
  const char* tower;  // clip.projector_type
  int tiles;          // tiles the tower encodes for that picture
};

// InternVL's 64 x 64 picture is cut into 2 x 2 tiles and a thumbnail; SmolVLM's 144 x 96 into
// 3 x 2 tiles and the global image (their fixtures' READMEs).
inline const Family kFamilies[] = {
    {"idefics3", "img_144x96.png", "idefics3", 7},
    {"gemma3", "img_64.png", "gemma3", 1},
    {"internvl", "img_64.png", "internvl", 5},
    {"llava", "img_32.png", "mlp", 1},
};

inline std::string data(const Family& f, const std::string& file) {
  return std::string(KAMERA_SOURCE_DIR) + "/tests/data/" + f.name + "/" + file;
}

inline std::string family_name(const testing::TestParamInfo<Family>& i) {
  return i.param.name;
}

// The family's decoder (a context of kv_tokens), its tower and its picture's placed chunk.
struct Pair {
  std::unique_ptr<kamera::Context> ctx;
  std::unique_ptr<kamera::MediaTower> tower;
  kamera::Image image;
  std::shared_ptr<const kamera::ChunkContent> picture;

  // Fails the test (and leaves picture null) when any piece does not load.
  Pair(const Family& f, int64_t kv_tokens) {
    ctx = tiny::context(data(f, "decoder.gguf"), kv_tokens, 16, size_t(1) << 28, 1);
    if (!ctx) return;
    auto t = kamera::MediaTower::load(data(f, "mmproj.gguf"), ctx->model(), 1, nullptr);
    EXPECT_TRUE(t.ok()) << t.message();
    auto img = kamera::load_image(data(f, f.image));
    EXPECT_TRUE(img.ok()) << img.message();
    if (!t.ok() || !img.ok()) return;
    tower = std::move(*t);
    image = std::move(*img);
    auto c = tower->chunk(std::span<const kamera::Image>(&image, 1), nullptr, 0, {});
    EXPECT_TRUE(c.ok()) << c.message();
    if (c.ok()) picture = *c;
  }
};

}  // namespace vl_family_pairs
