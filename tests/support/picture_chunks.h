// What the picture-chunk tests of the towers read beside their decoders share (SmolVLM, Gemma 3,
// InternVL, LLaVA-1.5: the committed pairs of tests/data/<family>): a picture cache over the
// tower, the decoder's logits after a picture against llama.cpp's mtmd, and the check that a
// picture is encoded once and that its chunk relocates exactly.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "cache/chunk_cache.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "media/image.h"
#include "support/chunk_relocation.h"
#include "support/mtmd_reference.h"
#include "support/tiny_models.h"

namespace picture_chunks {

// f(images, picture): Pictures over the Tower of dir/mmproj.gguf, beside ctx's decoder, on one
// thread, and the picture dir/picture_file.
template <class Tower, class Pictures, class F>
void with_pictures(kamera::Context& ctx, const std::string& dir, const std::string& picture_file,
                   F&& f) {
  using namespace kamera;
  auto tower = Tower::load(dir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok()) << tower.message();
  ThreadPool pool(1);
  Pictures images(*tower, ctx.model().fingerprint, &pool);
  auto img = load_image(dir + picture_file);
  ASSERT_TRUE(img.ok());
  f(images, *img);
}

// The picture dir/picture_file as a chunk of `rows` rows beside dir/decoder.gguf, decoded after
// the text before it in llama.cpp's mtmd chunks (dir/MTMD.json) and followed by the text after
// it: the last row's logits within 1e-3 of llama.cpp's (dir/MTMD_logits.f32), printed after
// `label`, the same argmax (mtmd_reference.h).
template <class Tower, class Pictures>
void expect_logits_after_picture(const std::string& dir, const std::string& picture_file, int rows,
                                 const std::string& mtmd, const char* label) {
  using namespace kamera;
  auto ctx = tiny::context(dir + "decoder.gguf", 512, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(ctx);
  with_pictures<Tower, Pictures>(*ctx, dir, picture_file, [&](Pictures& images, const Image& img) {
    auto pic = images.image(img);
    ASSERT_TRUE(pic.ok()) << pic.message();
    ASSERT_EQ((*pic)->n(), rows);
    mtmd_reference::expect_logits_after(*ctx,
                                        mtmd_reference::read_mtmd_prompt(dir + mtmd + ".json"),
                                        **pic, dir + mtmd + "_logits.f32", label);
  });
}

// The picture encoded the first time (then first(chunk), when given), the kept chunk the second;
// its canonical placed at 1, 8, 301 gives a fresh prefill's logits of q there within 1e-5
// (chunk_relocation.h).
template <class Pictures>
void expect_kept_and_relocates(kamera::Context& ctx, Pictures& images, const kamera::Image& img,
                               const kamera::ChunkContent& q,
                               const std::function<void(const kamera::ChunkContent&)>& first = {}) {
  bool encoded = false;
  auto pic = images.image(img, &encoded);
  ASSERT_TRUE(pic.ok()) << pic.message();
  EXPECT_TRUE(encoded);
  if (first) first(**pic);
  auto again = images.image(img, &encoded);  // the same picture: the kept chunk
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(encoded);
  EXPECT_EQ(again->get(), pic->get());
  chunk_relocation::expect_relocates(ctx, **pic, q, {0, 7, 300}, 1e-5);
}

// The same for Pictures over the Tower of dir/mmproj.gguf beside dir/decoder.gguf, on the picture
// dir/picture_file; first(images, chunk) after the first encode, when given.
template <class Tower, class Pictures>
void expect_picture_kept_and_relocates(
    const std::string& dir, const std::string& picture_file, const kamera::ChunkContent& q,
    const std::function<void(Pictures&, const kamera::ChunkContent&)>& first = {}) {
  using namespace kamera;
  auto ctx = tiny::context(dir + "decoder.gguf", 1024, 16, size_t(1) << 27, 1);
  ASSERT_TRUE(ctx);
  with_pictures<Tower, Pictures>(*ctx, dir, picture_file, [&](Pictures& images, const Image& img) {
    std::function<void(const ChunkContent&)> then;
    if (first) then = [&](const ChunkContent& pic) { first(images, pic); };
    expect_kept_and_relocates(*ctx, images, img, q, then);
  });
}

}  // namespace picture_chunks
