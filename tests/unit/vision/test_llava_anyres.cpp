// LLaVA-1.6's any-resolution grid (vision/llava_anyres.h) on the committed tiny tower
// (tests/data/llava16, beside tests/data/llava's decoder): the plan and the pixels against a
// transcription of Hugging Face's LlavaNext processor and model (make_hf_reference.py), the
// tower's tiles and the decoder's logits against llama.cpp d32676d's mtmd on the same file, and
// the packed picture against Hugging Face's pack_image_features run on llama.cpp's tile rows.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cache/chunk_cache.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "support/chunk_relocation.h"
#include "support/gguf_copy.h"
#include "support/idefics3_fixture.h"  // read_f32, rel_diff, bilinear_corners
#include "support/mtmd_reference.h"
#include "support/tiny_models.h"
#include "vision/llava_anyres.h"
#include "vision/llava_chunks.h"

using namespace kamera;
using idefics3_fixture::read_f32;
using idefics3_fixture::rel_diff;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/llava16/";
const std::string kDecoder = std::string(KAMERA_SOURCE_DIR) + "/tests/data/llava/decoder.gguf";

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

std::string fnv1a(const Image& img) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint8_t b : img.rgb) h = (h ^ b) * 0x100000001B3ull;
  return fmt::format("{:016x}", h);
}

// llama.cpp's rows for a picture without a resize of its tiles (64 x 32, 40 x 64): kamera's
// tower on the tiles, row by row, then on the overview llama.cpp stretches with its bilinear.
std::vector<float> llama_cpp_order(const LlavaVisionModel& tower, const Image& img) {
  auto plan = llava_anyres_plan(img.width, img.height, tower.cfg);
  EXPECT_TRUE(plan.ok());
  auto pics = llava_anyres_pictures(img, *plan, tower.cfg);
  EXPECT_TRUE(pics.ok());
  pics->push_back(
      idefics3_fixture::bilinear_corners(img, tower.cfg.image_size, tower.cfg.image_size));
  LlavaVisionEncoder enc(tower, nullptr);
  std::vector<float> rows;
  for (size_t i = 1; i < pics->size(); ++i) {  // the tiles, then the overview
    auto r = enc.encode((*pics)[i]);
    EXPECT_TRUE(r.ok()) << r.message();
    rows.insert(rows.end(), r->begin(), r->end());
  }
  return rows;
}

}  // namespace

TEST(LlavaAnyres, LoadsTheConvertersLayout) {
  auto t = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_TRUE(t->cfg.anyres());
  EXPECT_EQ(t->cfg.pinpoints.size(), 5u);
  EXPECT_EQ(t->cfg.newline_tensor, "model.image_newline");
  EXPECT_EQ(t->w.newline.size(), size_t(t->cfg.out_dim));
  auto v15 =
      LlavaVisionModel::load(std::string(KAMERA_SOURCE_DIR) + "/tests/data/llava/mmproj.gguf");
  ASSERT_TRUE(v15.ok());
  EXPECT_FALSE(v15->cfg.anyres());
  EXPECT_NE(v15->fingerprint, t->fingerprint);
}

// Pinpoints that are not a grid of tiles, a merge other than spatial_unpad and a grid beside
// MobileVLM's projector are refused by name.
TEST(LlavaAnyres, LoaderRefusesWhatItDoesNotRun) {
  auto refused = [](const std::string& from, const std::function<void(GgufWriter&)>& set) {
    const std::string to = unique_temp("kamera-llava16-bad.gguf");
    tiny::copy_gguf(from, to, set);
    auto m = LlavaVisionModel::load(to);
    EXPECT_FALSE(m.ok());
    return m.ok() ? std::string() : m.message();
  };
  const std::string v16 = kDir + "mmproj.gguf";
  EXPECT_NE(refused(v16,
                    [](GgufWriter& w) {
                      w.set_i32_array("clip.vision.image_grid_pinpoints", {48, 32});
                    })
                .find("is not a grid"),
            std::string::npos);
  EXPECT_NE(refused(v16,
                    [](GgufWriter& w) {
                      w.set_i32_array("clip.vision.image_grid_pinpoints", {32, 64, 96});
                    })
                .find("must be pairs"),
            std::string::npos);
  EXPECT_NE(
      refused(v16, [](GgufWriter& w) { w.set_string("clip.vision.mm_patch_merge_type", "flat"); })
          .find("spatial_unpad"),
      std::string::npos);
  EXPECT_NE(refused(std::string(KAMERA_SOURCE_DIR) + "/tests/data/mobilevlm/mmproj.gguf",
                    [](GgufWriter& w) {
                      w.set_i32_array("clip.vision.image_grid_pinpoints", {96, 96});
                    })
                .find("beside MobileVLM's projector"),
            std::string::npos);
}

// The best resolution, the resized size and offset, the grid, the unpadded box and the row
// count of twelve picture sizes equal the transcription of Hugging Face's code.
TEST(LlavaAnyres, PlanIsHuggingFaces) {
  auto t = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(t.ok());
  const auto ref = read_json(kDir + "hf_reference.json");
  for (const auto& r : ref["plans"]) {
    const int w = r["width"], h = r["height"];
    auto p = llava_anyres_plan(w, h, t->cfg);
    ASSERT_TRUE(p.ok()) << p.message();
    const std::string at = fmt::format("{} x {}", w, h);
    EXPECT_EQ(p->best_w, r["best_width"].get<int>()) << at;
    EXPECT_EQ(p->best_h, r["best_height"].get<int>()) << at;
    EXPECT_EQ(p->resized_w, r["resized_width"].get<int>()) << at;
    EXPECT_EQ(p->resized_h, r["resized_height"].get<int>()) << at;
    EXPECT_EQ(p->paste_x, r["paste_x"].get<int>()) << at;
    EXPECT_EQ(p->paste_y, r["paste_y"].get<int>()) << at;
    EXPECT_EQ(p->grid_rows, r["grid_rows"].get<int>()) << at;
    EXPECT_EQ(p->grid_cols, r["grid_cols"].get<int>()) << at;
    EXPECT_EQ((std::vector<int>{p->r0, p->r1, p->c0, p->c1}), r["unpad"].get<std::vector<int>>())
        << at;
    EXPECT_EQ(p->rows(t->cfg.side()), r["rows"].get<int64_t>()) << at;
    auto rows = llava_picture_rows(w, h, t->cfg);
    ASSERT_TRUE(rows.ok());
    EXPECT_EQ(*rows, r["rows"].get<int64_t>()) << at;
  }
}

// The grid's rows in the order pack_image_features gives them (unpadded, a newline row after each
// line), for three picture sizes: rows tagged tile * side^2 + row, the newline -1, the base -2.
TEST(LlavaAnyres, PackIsHuggingFaces) {
  auto t = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(t.ok());
  const LlavaVisionConfig& c = t->cfg;
  const size_t o = size_t(c.out_dim), per = size_t(c.rows());
  const auto ref = read_json(kDir + "hf_reference.json");
  for (const auto& [size, order] : ref["pack_orders"].items()) {
    int w = 0, h = 0;
    ASSERT_EQ(std::sscanf(size.c_str(), "%dx%d", &w, &h), 2);
    auto p = llava_anyres_plan(w, h, c);
    ASSERT_TRUE(p.ok());
    std::vector<std::vector<float>> encoded(size_t(1 + p->tiles()));
    encoded[0].assign(per * o, -2.0f);
    for (size_t tile = 0; tile < size_t(p->tiles()); ++tile)
      for (size_t r = 0; r < per; ++r)
        encoded[1 + tile].insert(encoded[1 + tile].end(), o, float(tile * per + r));
    const std::vector<float> out = llava_anyres_pack(encoded, *p, c, std::vector<float>(o, -1.0f));
    ASSERT_EQ(out.size(), (per + order.size()) * o) << size;
    EXPECT_EQ(int64_t(out.size() / o), p->rows(c.side())) << size;
    for (size_t r = 0; r < per; ++r) ASSERT_EQ(out[r * o], -2.0f) << size;
    for (size_t j = 0; j < order.size(); ++j)
      ASSERT_EQ(out[(per + j) * o + o - 1], order[j].get<float>()) << size << " row " << j;
  }
}

// The base image and every tile of three pictures equal PIL's, byte for byte.
TEST(LlavaAnyres, PicturesArePils) {
  auto t = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(t.ok());
  const auto ref = read_json(kDir + "hf_reference.json");
  for (const auto& [name, hashes] : ref["pictures"].items()) {
    auto img = load_image(kDir + name);
    ASSERT_TRUE(img.ok()) << name;
    auto p = llava_anyres_plan(img->width, img->height, t->cfg);
    ASSERT_TRUE(p.ok());
    auto pics = llava_anyres_pictures(*img, *p, t->cfg);
    ASSERT_TRUE(pics.ok()) << pics.message();
    ASSERT_EQ(pics->size(), hashes.size()) << name;
    for (size_t i = 0; i < pics->size(); ++i)
      EXPECT_EQ(fnv1a((*pics)[i]), hashes[i].get<std::string>()) << name << " picture " << i;
  }
}

namespace {

// "USER: <__media__>\nthe ASSISTANT:" as llama.cpp's mtmd chunked it for a picture (its rows:
// each image chunk's).
mtmd_reference::MtmdPrompt mtmd_prompt(const std::string& size) {
  return mtmd_reference::read_mtmd_prompt(kDir + "llama_cpp_" + size + ".json");
}

ChunkContent linear_chunk(std::vector<float> rows, int dim) {
  ChunkContent c;
  c.dim = dim;
  c.embeddings = std::move(rows);
  for (int i = 0; i < c.n(); ++i) c.layout.push_back(Pos::linear(i));
  return c;
}

// llama.cpp's dumps are made by hand (README.md); until they are committed the tests that read
// them skip, saying so.
bool missing_dumps() {
  for (const char* f : {"llama_cpp_64x32.json", "llama_cpp_40x64.json", "hf_pack_40x64.f32"})
    if (!std::ifstream(kDir + f)) return true;
  return false;
}
#define SKIP_WITHOUT_DUMPS()                                                                     \
  if (missing_dumps())                                                                           \
  GTEST_SKIP() << "llama.cpp's dumps of tests/data/llava16 are not there (README.md: mtmd_dump " \
                  "against libmtmd)"

size_t argmax(const std::vector<float>& v) {
  return size_t(std::max_element(v.begin(), v.end()) - v.begin());
}

const char* const kSizes[] = {"64x32", "40x64"};

}  // namespace

// mtmd cuts 64 x 32 into 2 tiles and 40 x 64 into 2 x 2 (no resize: the picture fits its
// pinpoint; 40 x 64 is centred on black) and appends the overview; each is an image chunk of 64
// rows, nothing between them. kamera's tower on the same pixels: within 2e-3 of the scale.
TEST(LlavaAnyres, TilesAndOverviewMatchLlamaCppMtmd) {
  SKIP_WITHOUT_DUMPS();
  auto t = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(t.ok());
  for (const char* size : kSizes) {
    auto img = load_image(kDir + "img_" + size + ".png");
    ASSERT_TRUE(img.ok());
    auto plan = llava_anyres_plan(img->width, img->height, t->cfg);
    ASSERT_TRUE(plan.ok());
    const mtmd_reference::MtmdPrompt p = mtmd_prompt(size);
    EXPECT_EQ(p.rows, std::vector<int>(size_t(plan->tiles() + 1), t->cfg.rows())) << size;
    const std::vector<float> want = read_f32(kDir + "llama_cpp_" + size + "_embd.f32");
    const std::vector<float> got = llama_cpp_order(*t, *img);
    ASSERT_EQ(got.size(), want.size()) << size;
    const size_t per = size_t(t->cfg.rows()) * size_t(t->cfg.out_dim);
    double worst = 0;
    for (size_t off = 0; off < want.size(); off += per)
      worst = std::max(worst, rel_diff(got.data() + off, want.data() + off, per));
    std::printf("%s: %zu pictures, kamera vs llama.cpp %.3e of the largest |value|\n", size,
                want.size() / per, worst);
    EXPECT_LT(worst, 2e-3) << size;
  }
}

// kamera's picture (Hugging Face's layout): the base's rows, then the grid unpadded with a newline
// row per line. The grid against pack_image_features run by numpy on llama.cpp's tile rows
// (hf_pack_*.f32); the base, stretched with PIL's bicubic where llama.cpp's overview uses its
// bilinear, is measured against llama.cpp's overview.
TEST(LlavaAnyres, GridIsPackImageFeaturesOnLlamaCppTiles) {
  SKIP_WITHOUT_DUMPS();
  auto t = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(t.ok());
  ThreadPool pool(1);
  LlavaImageChunks images(*t, {1, 2}, &pool);
  const size_t base = size_t(t->cfg.rows()) * size_t(t->cfg.out_dim);
  for (const char* size : kSizes) {
    auto img = load_image(kDir + "img_" + size + ".png");
    ASSERT_TRUE(img.ok());
    auto pic = images.image(*img);
    ASSERT_TRUE(pic.ok()) << pic.message();
    auto rows = images.rows(img->width, img->height);
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ((*pic)->n(), *rows);
    const std::vector<float> want = read_f32(kDir + "hf_pack_" + std::string(size) + ".f32");
    const std::vector<float>& got = (*pic)->embeddings;
    ASSERT_EQ(got.size(), base + want.size()) << size;
    const double grid = rel_diff(got.data() + base, want.data(), want.size());
    const std::vector<float> mtmd = read_f32(kDir + "llama_cpp_" + std::string(size) + "_embd.f32");
    const double ov = rel_diff(got.data(), mtmd.data() + mtmd.size() - base, base);
    std::printf(
        "%s: %lld rows; grid vs Hugging Face's pack of llama.cpp's tiles %.3e, base vs "
        "llama.cpp's overview %.3e of the largest |value|\n",
        size, static_cast<long long>(*rows), grid, ov);
    EXPECT_LT(grid, 2e-3) << size;
    EXPECT_GT(ov, 2e-3) << size;  // not llama.cpp's overview pixels
  }
}

// The decoder after llama.cpp's rows (kamera's tower, llama.cpp's order and overview pixels):
// within 1e-3 of llama.cpp's logits, same argmax. kamera's own layout (Hugging Face's) is measured.
TEST(LlavaAnyres, LogitsAfterThePictureMatchLlamaCppMtmd) {
  SKIP_WITHOUT_DUMPS();
  auto ctx = tiny::context(kDecoder, 1024, 16, size_t(1) << 27, 1);
  ASSERT_TRUE(ctx);
  auto t = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(check_llava_pair(t->cfg, ctx->model(), "mmproj").ok());
  ThreadPool pool(1);
  LlavaImageChunks images(*t, ctx->model().fingerprint, &pool);
  for (const char* size : kSizes) {
    auto img = load_image(kDir + "img_" + size + ".png");
    ASSERT_TRUE(img.ok());
    const mtmd_reference::MtmdPrompt p = mtmd_prompt(size);
    const std::vector<float> want =
        read_f32(kDir + "llama_cpp_" + std::string(size) + "_logits.f32");
    const auto got = mtmd_reference::last_logits_after(
        *ctx, p, linear_chunk(llama_cpp_order(*t, *img), t->cfg.out_dim));
    ASSERT_EQ(got.size(), want.size());
    const double rel = rel_diff(got.data(), want.data(), want.size());
    auto hf = images.image(*img);
    ASSERT_TRUE(hf.ok());
    const double rel_hf =
        rel_diff(mtmd_reference::last_logits_after(*ctx, p, **hf).data(), want.data(), want.size());
    std::printf(
        "%s: logits kamera (llama.cpp's order) vs llama.cpp %.3e; kamera's layout (Hugging "
        "Face's) vs llama.cpp %.3e of the largest |logit|\n",
        size, rel, rel_hf);
    EXPECT_LT(rel, 1e-3) << size;
    EXPECT_EQ(argmax(got), argmax(want)) << size;
  }
}

// The picture's chunk placed anywhere from its canonical KV equals a fresh prefill there (at 1, 8
// and 201: the decoder's context is 512); sent again it is the kept chunk.
TEST(LlavaAnyres, PictureRelocatesExactly) {
  auto ctx = tiny::context(kDecoder, 1024, 16, size_t(1) << 27, 1);
  ASSERT_TRUE(ctx);
  auto t = LlavaVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(t.ok());
  ThreadPool pool(1);
  LlavaImageChunks images(*t, ctx->model().fingerprint, &pool);
  auto img = load_image(kDir + "img_40x64.png");
  ASSERT_TRUE(img.ok());
  bool encoded = false;
  auto pic = images.image(*img, &encoded);
  ASSERT_TRUE(pic.ok()) << pic.message();
  EXPECT_TRUE(encoded);
  auto again = images.image(*img, &encoded);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(encoded);
  EXPECT_EQ(again->get(), pic->get());
  chunk_relocation::expect_relocates(*ctx, **pic, ChunkContent::from_tokens({116, 258, 10}),
                                     {0, 7, 200}, 1e-5);
}
