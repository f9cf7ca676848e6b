// Logits after an image: kamera's Qwen2-VL tower + decoder against llama.cpp c392e50 (clip.cpp +
// libllama, as llama-qwen2vl-cli runs them) on the same files, pixels and token ids.
//
// Files: `kamera make-model --arch qwen2vl-mmproj --preset tiny --seed 1` (F32) and `kamera
// make-model --arch qwen2vl --preset tiny --seed 2` (vision tokens <|vision_start|> = 508,
// <|vision_end|> = 509). Sequence: [1 45 67 508] [image 140 x 112: 4 x 5 merged rows]
// [509 77 88 99], positions as get_rope_index gives them (the image at t = 4, h = 4 + row,
// w = 4 + col; the text after at 9).
//
// Fixtures, made once by hand with a throwaway program (not committed) compiled against
// llama.cpp c392e50 (g++ vl_logits.cpp examples/llava/clip.cpp -lllama -lggml -lggml-base
// -lggml-cpu): clip_encode_float_image on the pixels normalised as (v / 255 - mean) / std, then
// llama_decode of the ids and of the image rows with llama-qwen2vl-cli's M-RoPE positions,
// and llama_get_logits_ith(-1) after the last token:
//   llamacpp-c392e50-vl-logits-tiny.f32           the image rows decoded one row per batch
//   llamacpp-c392e50-vl-logits-tiny-onebatch.f32  all image rows in one batch (llama-qwen2vl-cli)
// llama.cpp masks a key when its cell's position is greater than the query's, comparing only the
// t component: the rows of one image share t, so within one batch they see each other
// (bidirectional). The Hugging Face decoder is causal over image rows, and so is kamera; one row
// per batch makes llama.cpp causal too (a row cannot see cells not yet written), which is the
// comparison below. The one-batch fixture shows how far apart the two are (~12% of the scale).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/thread_pool.h"
#include "media/image.h"
#include "support/tiny_models.h"
#include "synthetic/synthetic_model.h"
#include "vision/rope_index.h"

namespace {

using namespace kamera;

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_vision/";

std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(0, std::ios::end);
  std::vector<float> v(size_t(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  return v;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::abs(double(x)));
  return m;
}

TEST(VlLlamaCpp, LogitsAfterImageMatchLlamaCpp) {
  const std::string tmp = testing::TempDir();
  const std::string mmproj = tmp + "kamera-vl-tiny-mmproj.gguf", dec = tmp + "kamera-vl-tiny.gguf";
  ASSERT_TRUE(QwenVisionModel::random(*qwen_vision_preset("qwen2vl", "tiny"), 1)
                  .write_gguf(mmproj, DType::F32)
                  .ok());
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(Arch::Qwen2Vl, "tiny");
  spec.seed = 2;
  ASSERT_TRUE(write_synthetic_gguf(spec, dec).ok());
  auto tower = QwenVisionModel::load(mmproj);
  ASSERT_TRUE(tower.ok()) << tower.message();
  auto m = tiny::load(dec);
  ASSERT_TRUE(m);
  std::filesystem::remove(mmproj);
  std::filesystem::remove(dec);
  ASSERT_EQ(m->tokenizer->piece(508), "<|vision_start|>");
  ASSERT_EQ(m->tokenizer->piece(509), "<|vision_end|>");

  auto img = load_image(kDir + "img_140x112.png");
  ASSERT_TRUE(img.ok()) << img.message();
  auto patches = qwen_preprocess_image(*img, QwenImageOptions::from(tower->cfg));
  ASSERT_TRUE(patches.ok());
  ThreadPool threads(2);
  auto e = QwenVisionEncoder(*tower, &threads).encode(*patches);
  ASSERT_TRUE(e.ok()) << e.message();
  ASSERT_EQ(e->n_rows(), 20);
  const std::vector<ChunkContent> pieces{ChunkContent::from_tokens({1, 45, 67, 508}),
                                         image_chunk(*e),
                                         ChunkContent::from_tokens({509, 77, 88, 99})};
  auto pool = tiny::pool_for(*m, 64);
  Engine engine(*m, 2);
  const SeqId s = pool->create_sequence();
  int32_t next = 0;
  auto got = prefill_pieces(engine, *pool, s, pieces, 0, LogitsMode::Last, &next);
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(next, 13);  // 4 text + max(1, 4, 5) + 4 text

  const auto causal = read_f32(kDir + "llamacpp-c392e50-vl-logits-tiny.f32");
  const auto one_batch = read_f32(kDir + "llamacpp-c392e50-vl-logits-tiny-onebatch.f32");
  ASSERT_EQ(causal.size(), got->size());
  const double scale = max_abs(causal);
  double diff = 0, diff_bidir = 0;
  for (size_t i = 0; i < causal.size(); ++i) {
    diff = std::max(diff, std::abs(double((*got)[i]) - causal[i]));
    diff_bidir = std::max(diff_bidir, std::abs(double((*got)[i]) - one_batch[i]));
  }
  std::printf("max |kamera - llama.cpp| = %.3e (causal), %.3e (one batch); scale %.3f\n", diff,
              diff_bidir, scale);
  EXPECT_GT(scale, 0.5);
  EXPECT_LE(diff, 1e-3 * scale);
  EXPECT_GT(diff_bidir, 1e-2 * scale);  // the comparison can tell the two masks apart
}

}  // namespace
