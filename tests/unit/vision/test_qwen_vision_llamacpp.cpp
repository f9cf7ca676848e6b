// kamera's Qwen2-VL tower against llama.cpp's own encoder (examples/llava/clip.cpp at c392e50) on
// the same mmproj file and pixels.
//
// Fixtures (tests/data/qwen_vision/llamacpp-c392e50-tiny-seed1-{f32,f16}.f32: 20 rows x 64 f32)
// were made once, by hand:
//   kamera make-model --arch qwen2vl-mmproj --preset tiny --seed 1 [--type f16] -o tiny.gguf
//   dump tiny.gguf img_140x112.png out.f32
// where `dump` is a throwaway program (not committed) compiled against llama.cpp c392e50
// (g++ dump.cpp examples/llava/clip.cpp -lggml -lggml-base -lggml-cpu -lllama) that loads the
// PNG with clip_image_load_from_file, normalises it as (v / 255 - mean) / std with the file's
// mean and std, and calls clip_encode_float_image (no resize: the sides are multiples of 28).
// llama-qwen2vl-cli runs the same file with `make-model --arch qwen2vl --preset tiny` as the
// decoder (20 image tokens).
//
// The test rebuilds the same file (make-model is deterministic), encodes the same image, and
// requires max |kamera - llama.cpp| <= 1e-3 x max |llama.cpp|. Measured: 3.8e-4 (F32), 4.8e-4
// (F16). The gap is llama.cpp's activations, not the tower: ggml evaluates GELU and quick GELU
// through f16 lookup tables (and the merger's GELU as the tanh approximation) where the model
// (and kamera) use exact erf GELU and x sigmoid(1.702 x); with F16 weights ggml also rounds the
// activations to f16 in every product. A numpy forward with those approximations lands within
// 8e-5 of llama.cpp (F32 file); with exact ones within 5e-7 of kamera.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/thread_pool.h"
#include "media/image.h"
#include "support/temp_path.h"
#include "vision/qwen_vision_encoder.h"

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

TEST(QwenVisionLlamaCpp, EmbeddingsMatchLlamaCppClip) {
  auto img = load_image(kDir + "img_140x112.png");
  ASSERT_TRUE(img.ok()) << img.message();
  ThreadPool pool(2);
  for (const auto& [type, fixture] :
       {std::pair{DType::F32, "llamacpp-c392e50-tiny-seed1-f32.f32"},
        std::pair{DType::F16, "llamacpp-c392e50-tiny-seed1-f16.f32"}}) {
    SCOPED_TRACE(fixture);
    const std::string path = unique_temp("kamera-qwen2vl-tiny-seed1.gguf");
    ASSERT_TRUE(QwenVisionModel::random(*qwen_vision_preset("qwen2vl", "tiny"), 1)
                    .write_gguf(path, type)
                    .ok());
    auto m = QwenVisionModel::load(path);
    ASSERT_TRUE(m.ok()) << m.message();
    std::filesystem::remove(path);
    auto p = qwen_preprocess_image(*img, QwenImageOptions::from(m->cfg));
    ASSERT_TRUE(p.ok());
    ASSERT_EQ(p->resized_width, 140);  // no resize: llama.cpp saw the same pixels
    ASSERT_EQ(p->resized_height, 112);
    auto e = QwenVisionEncoder(*m, &pool).encode(*p);
    ASSERT_TRUE(e.ok()) << e.message();
    const std::vector<float> ref = read_f32(kDir + fixture);
    ASSERT_EQ(ref.size(), e->rows.size());
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      num = std::max(num, std::abs(double(e->rows[i]) - ref[i]));
      den = std::max(den, std::abs(double(ref[i])));
    }
    std::printf("%s: max |kamera - llama.cpp| = %.3e, max |llama.cpp| = %.3f, ratio %.2e\n",
                fixture, num, den, num / den);
    EXPECT_LE(num, 1e-3 * den);
    EXPECT_GT(den, 0.5);  // a real signal, not zeros
  }
}

}  // namespace
