// MobileVLM's projectors on the CLIP tower (vision/llava_ldp.h): V2's ldpv2 and V1's ldp, on the
// committed tiny towers (tests/data/mobilevlm, beside tests/data/llava's decoder): the picture's
// rows and the decoder's logits after it against llama.cpp d32676d's mtmd on the same files and
// picture.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cache/chunk_cache.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "support/chunk_relocation.h"
#include "support/idefics3_fixture.h"  // read_f32, rel_diff
#include "support/tiny_models.h"
#include "vision/llava_chunks.h"
#include "vision/llava_ldp.h"

using namespace kamera;
using idefics3_fixture::read_f32;
using idefics3_fixture::rel_diff;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/mobilevlm/";
const std::string kDecoder = std::string(KAMERA_SOURCE_DIR) + "/tests/data/llava/decoder.gguf";

struct Tower {
  const char* file;
  LlavaProjector projector;
  const char* dump;  // llama.cpp's, tests/data/mobilevlm/README.md
};
const Tower kTowers[] = {{"mmproj.gguf", LlavaProjector::kLdpV2, "llama_cpp_96"},
                         {"mmproj_ldp.gguf", LlavaProjector::kLdp, "llama_cpp_ldp_96"}};

class LlavaMobileVlm : public ::testing::TestWithParam<Tower> {};

// llama.cpp's dumps are made by hand (README.md); until they are committed the tests that read
// them skip, saying so.
#define SKIP_WITHOUT_DUMPS()                                                             \
  if (!std::ifstream(kDir + GetParam().dump + ".json"))                                  \
  GTEST_SKIP() << "llama.cpp's dumps of tests/data/mobilevlm are not there (README.md: " \
                  "mtmd_dump against libmtmd)"

}  // namespace

INSTANTIATE_TEST_SUITE_P(Projectors, LlavaMobileVlm, ::testing::ValuesIn(kTowers),
                         [](const auto& info) {
                           return std::string(
                               info.param.projector == LlavaProjector::kLdp ? "ldp" : "ldpv2");
                         });

TEST_P(LlavaMobileVlm, LoadsTheConvertersLayout) {
  auto t = LlavaVisionModel::load(kDir + GetParam().file);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->cfg.projector, GetParam().projector);
  EXPECT_EQ(t->cfg.side(), 24);
  EXPECT_EQ(t->cfg.rows(), 144);  // 24 x 24 patches halved both ways
}

// The projector after its MLP on a drawn 24 x 24 grid of rows against numpy's float64
// transcription of MobileVLM's modules (make_projector_reference.py): within 1e-4 of the scale.
TEST_P(LlavaMobileVlm, ProjectorMatchesNumpyTranscription) {
  auto t = LlavaVisionModel::load(kDir + GetParam().file);
  ASSERT_TRUE(t.ok());
  const size_t n = size_t(t->cfg.n_patches()), o = size_t(t->cfg.out_dim);
  std::vector<float> y(n * o);
  for (size_t r = 0; r < n; ++r)
    for (size_t k = 0; k < o; ++k)
      y[r * o + k] = float(std::sin(0.37 * double(r) + 0.11 * double(k)));
  const bool v2 = GetParam().projector == LlavaProjector::kLdpV2;
  const std::vector<float> got = v2 ? ldpv2_project(*t, y) : ldp_project(*t, y, nullptr);
  const std::vector<float> want = read_f32(kDir + (v2 ? "proj_ref_ldpv2.f32" : "proj_ref_ldp.f32"));
  ASSERT_EQ(got.size(), want.size());
  const double rel = rel_diff(got.data(), want.data(), want.size());
  std::printf("%s projector: kamera vs numpy %.3e of the largest |value|\n", GetParam().file, rel);
  EXPECT_LT(rel, 1e-4);
}

// A 96 x 96 picture (the tower's size: neither side pads or resizes it): 144 rows within 2e-3
// of the largest |value| of llama.cpp's.
TEST_P(LlavaMobileVlm, PictureMatchesLlamaCppClip) {
  SKIP_WITHOUT_DUMPS();
  auto t = LlavaVisionModel::load(kDir + GetParam().file);
  ASSERT_TRUE(t.ok());
  auto img = load_image(kDir + "img_96.png");
  ASSERT_TRUE(img.ok());
  LlavaVisionEncoder enc(*t, nullptr);
  auto got = enc.encode(*img);
  ASSERT_TRUE(got.ok()) << got.message();
  const std::vector<float> want = read_f32(kDir + GetParam().dump + "_embd.f32");
  ASSERT_EQ(got->size(), want.size());
  const double rel = rel_diff(got->data(), want.data(), want.size());
  std::printf("%s picture: kamera vs llama.cpp %.3e of the largest |value|\n", GetParam().file,
              rel);
  EXPECT_LT(rel, 2e-3);
}

// The decoder's logits after "USER: <picture>\nthe ASSISTANT:" within 1e-3 of llama.cpp's, same
// argmax; the picture's chunk relocates exactly.
TEST_P(LlavaMobileVlm, LogitsAfterThePictureMatchLlamaCppMtmd) {
  auto ctx = tiny::context(kDecoder, 1024, 16, size_t(1) << 27, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto t = LlavaVisionModel::load(kDir + GetParam().file);
  ASSERT_TRUE(t.ok());
  ThreadPool pool(1);
  LlavaImageChunks images(*t, m.fingerprint, &pool);
  auto img = load_image(kDir + "img_96.png");
  ASSERT_TRUE(img.ok());
  auto pic = images.image(*img);
  ASSERT_TRUE(pic.ok()) << pic.message();
  chunk_relocation::expect_relocates(*ctx, **pic, ChunkContent::from_tokens({116, 258, 10}),
                                     {0, 7, 300}, 1e-5);
  SKIP_WITHOUT_DUMPS();
  std::ifstream jf(kDir + GetParam().dump + ".json");
  const auto ref = nlohmann::json::parse(jf);
  std::vector<int32_t> before, after;
  bool seen = false;
  for (const auto& c : ref["chunks"]) {
    if (c.contains("image")) {
      EXPECT_EQ(c["image"].get<int64_t>(), (*pic)->n());
      seen = true;
      continue;
    }
    for (int32_t tok : c["text"]) (seen ? after : before).push_back(tok);
  }
  const std::vector<float> want = read_f32(kDir + GetParam().dump + "_logits.f32");
  ChunkCache& cc = ctx->cache();
  {
    ScopedSequence s(ctx->pool());
    const int32_t nb = int32_t(before.size());
    ASSERT_TRUE(cc.forward_chunk(s.id(), ChunkContent::from_tokens(before), 0).ok());
    ASSERT_TRUE(cc.forward_chunk(s.id(), **pic, nb).ok());
    auto got = cc.forward_chunk(s.id(), ChunkContent::from_tokens(after), nb + (*pic)->n(),
                                LogitsMode::All);
    ASSERT_TRUE(got.ok()) << got.message();
    const size_t V = size_t(m.cfg.n_vocab);
    ASSERT_EQ(want.size(), V);
    const float* last = got->data() + got->size() - V;
    const double rel = rel_diff(last, want.data(), V);
    std::printf("%s logits after the picture: kamera vs llama.cpp %.3e of the largest |logit|\n",
                GetParam().file, rel);
    EXPECT_LT(rel, 1e-3);
    EXPECT_EQ(std::max_element(last, last + V) - last,
              std::max_element(want.begin(), want.end()) - want.begin());
  }
}
