// The Qwen3-VL tower and decoder against llama.cpp d32676d (mtmd + libllama, CPU) on the same
// files and pixels (tests/data/qwen3vl/README.md says how the fixtures were made):
//
//   tower  `kamera make-model --arch qwen3vl-mmproj --preset tiny --seed 1` (F32), the picture
//          img_288x256.png: 18 x 16 patches of 16, 9 x 8 merged rows of 3 x 64 values (the
//          merger's, then the deepstack mergers' of layers 0 and 1). Neither processor resizes it
//          (sides multiples of 32; 73728 pixels within Hugging Face's [65536, 16777216] and
//          llama.cpp's [8192, 4194304]), so both towers read the same normalized pixels.
//   vl     the same tower and `make-model --arch qwen3vl --preset tiny --seed 3`: every position's
//          logits of [1 45 67 508][the picture's 72 rows][509 77 88 99], the rows at
//          (4, 4 + row, 4 + col), the text after at 13 (llama.cpp's 2-D causal mask inside an
//          image is raster order, as Hugging Face's causal mask over the rows).
//
// Where llama.cpp's CPU path rounds, and so the tolerances: its patch convolution runs on f16
// (ggml_conv_2d's im2col is F16 unless the kernel is BF16: pixels and kernel rounded to 11
// bits), its GELU is the tanh form through an f16 table (inputs and outputs rounded to f16) in
// the blocks and in both mergers, where Hugging Face's mergers use the exact erf GELU (kamera
// follows Hugging Face: tanh GELU in the blocks, erf in the mergers). The tower's rows are
// compared within 1e-3 of their largest magnitude, per slice; the logits after them within 1e-3
// of the largest logit (the decoder alone, on rows both engines are given, agrees within 1e-4:
// Qwen3Vl.LogitsMatchLlamaCpp).
#include <gtest/gtest.h>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cache/chunk_cache.h"
#include "core/thread_pool.h"
#include "media/image.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "synthetic/synthetic_model.h"
#include "vision/rope_index.h"

namespace {

using namespace kamera;

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen3vl/";

std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(0, std::ios::end);
  std::vector<float> v(size_t(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  return v;
}

std::string file_hash(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), {});
  return fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size()));
}

struct Pair {
  QwenVisionModel tower;
  std::unique_ptr<Model> decoder;
  nlohmann::json manifest;
};

Pair load_pair() {
  std::ifstream mf(kDir + "llama_cpp_logits.json");
  Pair p;
  p.manifest = nlohmann::json::parse(mf);
  const auto& t = p.manifest["tower"];
  const std::string mm = unique_temp("kamera-qwen3vl-mmproj.gguf");
  EXPECT_TRUE(QwenVisionModel::random(*qwen_vision_preset("qwen3vl", "tiny"), t["seed"])
                  .write_gguf(mm, DType::F32)
                  .ok());
  EXPECT_EQ(file_hash(mm), t["xxh3_64"].get<std::string>());
  auto tower = QwenVisionModel::load(mm);
  EXPECT_TRUE(tower.ok()) << tower.message();
  if (tower.ok()) p.tower = std::move(*tower);
  std::filesystem::remove(mm);
  const auto& v = p.manifest["vl"];
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(Arch::Qwen3Vl, "tiny");
  spec.seed = v["seed"];
  spec.name = fmt::format("kamera-synthetic-qwen3vl-tiny-seed{}", spec.seed);
  const std::string dec = unique_temp("kamera-qwen3vl-dec.gguf");
  EXPECT_TRUE(write_synthetic_gguf(spec, dec).ok());
  EXPECT_EQ(file_hash(dec), v["xxh3_64"].get<std::string>());
  p.decoder = tiny::load(dec);
  return p;
}

QwenVisionEmbeddings encode_picture(const QwenVisionModel& tower) {
  auto img = load_image(kDir + "img_288x256.png");
  EXPECT_TRUE(img.ok()) << img.message();
  auto patches = qwen_preprocess_image(*img, QwenImageOptions::from(tower.cfg));
  EXPECT_TRUE(patches.ok());
  EXPECT_EQ(patches->resized_width, 288);  // not resized
  EXPECT_EQ(patches->resized_height, 256);
  ThreadPool threads(2);
  auto e = QwenVisionEncoder(tower, &threads).encode(*patches);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? std::move(*e) : QwenVisionEmbeddings{};
}

}  // namespace

TEST(Qwen3VlLlamaCpp, TowerRowsMatchLlamaCppPerSlice) {
  Pair p = load_pair();
  const QwenVisionEmbeddings e = encode_picture(p.tower);
  ASSERT_EQ(e.grid_h, 8);
  ASSERT_EQ(e.grid_w, 9);
  const auto want = read_f32(kDir + p.manifest["tower"]["rows"].get<std::string>());
  ASSERT_EQ(want.size(), e.rows.size());
  const int od = p.tower.cfg.out_dim, ew = p.tower.cfg.embed_width();
  for (int s = 0; s < ew / od; ++s) {  // the merger, then each deepstack merger
    double diff = 0, scale = 0;
    for (int64_t r = 0; r < e.n_rows(); ++r)
      for (int j = 0; j < od; ++j) {
        const size_t i = size_t(r * ew + s * od + j);
        diff = std::max(diff, std::abs(double(e.rows[i]) - want[i]));
        scale = std::max(scale, std::abs(double(want[i])));
      }
    std::printf("slice %d: max |kamera - llama.cpp| = %.3e, scale %.3f (%.2e of it)\n", s, diff,
                scale, diff / scale);
    EXPECT_GT(scale, 0.1);
    EXPECT_LE(diff, 1e-3 * scale) << "slice " << s;
  }
}

TEST(Qwen3VlLlamaCpp, LogitsAfterThePictureMatchLlamaCpp) {
  Pair p = load_pair();
  ASSERT_TRUE(p.decoder);
  const auto& v = p.manifest["vl"];
  const std::vector<int32_t> a = v["tokens_a"], b = v["tokens_b"];
  const std::vector<ChunkContent> pieces{ChunkContent::from_tokens(a),
                                         image_chunk(encode_picture(p.tower)),
                                         ChunkContent::from_tokens(b)};
  auto pool = tiny::pool_for(*p.decoder, 128);
  Engine engine(*p.decoder, 2);
  const SeqId s = pool->create_sequence();
  const auto placed = place_pieces(pieces, 0);
  std::vector<float> got;
  for (size_t i = 0; i < pieces.size(); ++i) {
    ForwardOptions o;
    o.logits = LogitsMode::All;
    auto l = engine.forward(*pool, s, forward_input(pieces[i], placed[i]), o);
    ASSERT_TRUE(l.ok()) << l.message();
    got.insert(got.end(), l->begin(), l->end());
  }
  EXPECT_EQ(placed[2][0].t, 4 + 9);  // after max(1, 8, 9)
  const auto want = read_f32(kDir + v["logits"].get<std::string>());
  ASSERT_EQ(want.size(), got.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(double(got[i]) - want[i]));
    scale = std::max(scale, std::abs(double(want[i])));
  }
  std::printf("max |kamera - llama.cpp| = %.3e over every position, scale %.3f (%.2e of it)\n",
              diff, scale, diff / scale);
  EXPECT_GT(scale, 0.5);
  EXPECT_LE(diff, 1e-3 * scale);
}
