// Kimi-VL's tower against llama.cpp d32676d's clip (projector type kimivl), on an image neither
// processor resizes (112 x 112: sides multiples of 28, 16 merged tokens, the 8 x 8 position table
// as is). llama.cpp's build_rope_2d turns the first half of each head by the column and the
// second by the row, where the model interleaves column and row pairs; its converter does not
// permute wq / wk for kimivl (it does for Kimi-K2.5). So llama.cpp's embeddings of the file as
// converted are not the model's; of a copy whose q / k rows (and biases) are permuted from the
// interleaved to the split layout, as conversion/kimivl.py does for Kimi-K2.5, they are. The
// committed fixture holds both (tests/data/kimivl/README.md); kamera runs the unpermuted file.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "media/image.h"
#include "support/temp_path.h"
#include "vision/kimi_vision_encoder.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/kimivl/";

std::string hash_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string b((std::istreambuf_iterator<char>(f)), {});
  return fmt::format("{:016x}", XXH3_64bits(b.data(), b.size()));
}

std::vector<float> read_f32(const std::string& path, size_t n) {
  std::vector<float> v(n);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * 4));
  EXPECT_TRUE(f) << "short file " << path;
  return v;
}

// q / k rows (h, i, a, b) -> (h, a, i, b): the pair of column i (a = 0) and of row i (a = 1)
// move to the first and second half of the head, as conversion/kimivl.py's Kimi-K2.5 permute.
void permute_rows(QwenLinear& l, int n_heads) {
  const int hd = l.out / n_heads, cols = l.in;
  std::vector<float> w = l.w.to_f32(), pw(w.size()), pb(l.b.size());
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < hd / 4; ++i)
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {
          const int from = h * hd + i * 4 + a * 2 + b, to = h * hd + a * (hd / 2) + i * 2 + b;
          std::copy(w.begin() + size_t(from) * cols, w.begin() + size_t(from + 1) * cols,
                    pw.begin() + size_t(to) * cols);
          pb[size_t(to)] = l.b[size_t(from)];
        }
  l.w = Weight::from_f32(std::move(pw), l.out, l.in);
  l.b = std::move(pb);
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, double(std::fabs(a[i] - b[i])));
    den = std::max(den, double(std::fabs(b[i])));
  }
  return num / den;
}

}  // namespace

TEST(KimiVisionLlamaCpp, EmbeddingsMatchLlamaCppOnSplitRopeCopy) {
  std::ifstream mf(kDir + "llama_cpp_vision.json");
  ASSERT_TRUE(mf) << "missing tests/data/kimivl/llama_cpp_vision.json";
  const auto m = nlohmann::json::parse(mf);
  const KimiVisionModel tower = KimiVisionModel::random(*kimi_vision_preset("tiny"), m["seed"]);
  const std::string path = unique_temp("kamera-kimi-vl-mmproj.gguf");
  ASSERT_TRUE(tower.write_gguf(path, DType::F32).ok());
  EXPECT_EQ(hash_of(path), m["xxh3_64"].get<std::string>());
  KimiVisionModel split = tower;  // the copy llama.cpp's rope reads as the model's
  for (auto& L : split.w.layers) {
    permute_rows(L.q, split.cfg.n_heads);
    permute_rows(L.k, split.cfg.n_heads);
  }
  const std::string split_path = unique_temp("kamera-kimi-vl-mmproj-split.gguf");
  ASSERT_TRUE(split.write_gguf(split_path, DType::F32).ok());
  EXPECT_EQ(hash_of(split_path), m["split_xxh3_64"].get<std::string>());
  if (const char* keep = std::getenv("KAMERA_KIMI_FIXTURE_DIR")) {  // to remake the fixture
    ASSERT_TRUE(tower.write_gguf(std::string(keep) + "/mmproj.gguf", DType::F32).ok());
    ASSERT_TRUE(split.write_gguf(std::string(keep) + "/mmproj-split.gguf", DType::F32).ok());
  }

  auto img = load_image(kDir + m["image"].get<std::string>());
  ASSERT_TRUE(img.ok()) << img.message();
  auto p = kimi_preprocess_image(*img, tower.cfg);
  ASSERT_TRUE(p.ok());
  ThreadPool pool(1);
  auto e = KimiVisionEncoder(tower, &pool).encode(*p);
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(e->n_rows(), m["tokens"].get<int64_t>());
  const auto want = read_f32(kDir + m["split"].get<std::string>(), e->rows.size());
  const auto converted = read_f32(kDir + m["converted"].get<std::string>(), e->rows.size());
  const double rel = rel_diff(e->rows, want), off = rel_diff(e->rows, converted);
  std::printf("kamera vs llama.cpp (split-rope copy) %.3e, vs llama.cpp (as converted) %.3e\n", rel,
              off);
  EXPECT_LT(rel, m["threshold"].get<double>());
  EXPECT_GT(off, 10 * m["threshold"].get<double>());  // the departure, measured
  // the permuted copy is another file of the same model: kamera's forward on it differs
  auto es = KimiVisionEncoder(split, &pool).encode(*p);
  ASSERT_TRUE(es.ok());
  EXPECT_GT(rel_diff(es->rows, e->rows), 10 * m["threshold"].get<double>());
}
