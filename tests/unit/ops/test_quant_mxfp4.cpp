// The mxfp4 quantizer (ops/quant_ref.h, what make-model writes gpt-oss's experts with) against
// the scalar dequantization reference: values already on a block's grid come back bit for bit,
// and every other value comes back as the nearest of its block's 16 levels (checked by brute
// force), within a quarter of the block's largest |x|.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "ops/quant_blocks.h"
#include "ops/quant_ref.h"

namespace kamera {
namespace {

using quant::BlockMxfp4;

std::vector<float> round_trip(const std::vector<float>& x, std::vector<BlockMxfp4>* blocks) {
  blocks->assign(x.size() / kQK, BlockMxfp4{});
  quant::quantize_mxfp4_ref(x.data(), blocks->data(), int64_t(x.size()));
  std::vector<float> y(x.size());
  quant::dequantize_row_ref(GgmlType::MXFP4, blocks->data(), y.data(), int64_t(x.size()));
  return y;
}

struct GridCase {
  const char* name;
  int e_min, e_max;  // the E8M0 exponents of the random blocks
};

// Random blocks (exponent in the case's range, random nibbles) dequantized by the reference are
// on the grid: quantizing them again gives the same values (the exponent may differ when a block's
// largest level is small: the values do not).
TEST(QuantMxfp4, ValuesOnTheGridComeBackExactly) {
  const GridCase cases[] = {{"unit", 118, 136}, {"subnormal scales", 1, 8}, {"large", 240, 252}};
  for (const GridCase& c : cases) {
    std::mt19937 rng(7);
    std::vector<BlockMxfp4> src(64);
    for (BlockMxfp4& b : src) {
      b.e = uint8_t(c.e_min + int(rng() % uint32_t(c.e_max - c.e_min + 1)));
      for (uint8_t& q : b.qs) q = uint8_t(rng());
    }
    std::vector<float> x(src.size() * kQK);
    quant::dequantize_row_ref(GgmlType::MXFP4, src.data(), x.data(), int64_t(x.size()));
    std::vector<BlockMxfp4> blocks;
    const std::vector<float> y = round_trip(x, &blocks);
    int differ = 0;
    for (size_t i = 0; i < x.size(); ++i) differ += !(x[i] == y[i]);
    EXPECT_EQ(differ, 0) << c.name;
  }
}

struct ErrorCase {
  const char* name;
  std::function<float(std::mt19937&)> value;
};

// Off the grid: the block's scale puts max|x| in [4, 8) units of 2^(e - 127) (the top binade of
// E2M1, 6 the largest level), and each value is the nearest level times the scale.
TEST(QuantMxfp4, EachValueIsTheNearestLevelOfItsBlock) {
  const ErrorCase cases[] = {
      {"normal", [](std::mt19937& r) { return std::normal_distribution<float>(0, 1)(r); }},
      {"small", [](std::mt19937& r) { return std::normal_distribution<float>(0, 1e-3f)(r); }},
      {"wide", [](std::mt19937& r) { return std::uniform_real_distribution<float>(-100, 100)(r); }},
      {"spiky",
       [](std::mt19937& r) {
         return r() % 29 == 0 ? 1e3f : std::normal_distribution<float>(0, 0.01f)(r);
       }},
      {"zeros", [](std::mt19937&) { return 0.0f; }},
  };
  for (const ErrorCase& c : cases) {
    std::mt19937 rng(11);
    std::vector<float> x(kQK * 128);
    for (float& v : x) v = c.value(rng);
    std::vector<BlockMxfp4> blocks;
    const std::vector<float> y = round_trip(x, &blocks);
    int not_nearest = 0, over_bound = 0, bad_scale = 0;
    for (size_t b = 0; b < blocks.size(); ++b) {
      double amax = 0;
      for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(double(x[b * kQK + j])));
      const double unit = std::ldexp(1.0, int(blocks[b].e) - 127);  // E2M1 1.0
      bad_scale += amax > 0 && !(4 * unit <= amax && amax < 8 * unit);
      for (int j = 0; j < kQK; ++j) {
        const double xv = x[b * kQK + j], err = std::fabs(xv - y[b * kQK + j]);
        double best = INFINITY;
        for (int8_t level : quant::kMxfp4Values)
          best = std::min(best, std::fabs(xv - level * unit / 2));
        not_nearest += err > best;
        over_bound += err > amax / 4;
      }
    }
    EXPECT_EQ(not_nearest, 0) << c.name;
    EXPECT_EQ(over_bound, 0) << c.name;
    EXPECT_EQ(bad_scale, 0) << c.name;
  }
}

}  // namespace
}  // namespace kamera
