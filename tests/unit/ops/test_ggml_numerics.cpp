// Numerics::Ggml's kernels (ops/ggml_q8_0.h, ops/ggml_gelu.h) against what llama.cpp d32676d's CPU
// backend computes for the same inputs (tests/data/ggml_numerics: fixtures written by its libggml,
// README.md there has the command), bit for bit; and the vector kernel against the scalar
// reference.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "data/ggml_numerics/ref_values.h"
#include "ops/ggml_gelu.h"
#include "ops/ggml_q8_0.h"
#include "ops/kernels.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"
#include "ops/quant_ref.h"

namespace kamera {
namespace {

using namespace ggml_numerics_fixture;
using quant::BlockQ8_0;

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/ggml_numerics/";

template <class T>
std::vector<T> read_file(const std::string& name, size_t count) {
  std::ifstream f(kDir + name, std::ios::binary);
  std::vector<T> v(count);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(count * sizeof(T)));
  EXPECT_TRUE(f) << "short or missing fixture " << name;
  return v;
}

std::vector<BlockQ8_0> fixture_weights() {
  std::vector<BlockQ8_0> w(size_t(kRows * kCols / 32));
  for (int r = 0; r < kRows; ++r)
    for (int b = 0; b < kCols / 32; ++b) {
      BlockQ8_0& blk = w[size_t(r * (kCols / 32) + b)];
      blk.d = weight_scale_bits(r, b);
      for (int j = 0; j < 32; ++j) blk.qs[j] = weight_quant(r, b, j);
    }
  return w;
}

std::vector<float> fixture_acts(int n) {
  std::vector<float> x(size_t(n * kCols));
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < kCols; ++k) x[size_t(i * kCols + k)] = act_value(i, k);
  return x;
}

int bit_mismatches(const std::vector<float>& a, const float* b) {
  int n = 0;
  for (size_t i = 0; i < a.size(); ++i)
    n += std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]);
  return n;
}

// matmul of a Q8_0 matrix marked Ggml, one activation row and a batch of 7, equals ggml_mul_mat's
// output (llamafile's tinyBLAS_Q0_AVX at both sizes) bit for bit, on the path this CPU takes and
// with KAMERA_ISA's scalar reference. The default path's products, the same values to f32
// rounding, differ in the last bits: the fixture tells the two orders apart.
TEST(GgmlQ8_0, MatmulEqualsGgmlsCpuBackendBitForBit) {
  const auto ref = read_file<float>("ggml_q8_0.f32", size_t(kRows) * (1 + kActRows));
  const auto blocks = fixture_weights();
  auto view = make_weight_view(GgmlType::Q8_0, blocks.data(), kRows, kCols);
  ASSERT_TRUE(view.ok());
  ThreadPool pool(3);
  int default_mismatches = 0;
  for (int n : {1, kActRows}) {
    SCOPED_TRACE(n);
    const float* expect = ref.data() + (n == 1 ? 0 : kRows);
    const auto x = fixture_acts(n);
    std::vector<float> y(size_t(n * kRows));
    WeightView w = *view;
    matmul(w, x.data(), n, nullptr, y.data(), pool);
    default_mismatches += bit_mismatches(y, expect);
    w.numerics = Numerics::Ggml;
    ASSERT_TRUE(ggml_q8_0::applies(w));
    matmul(w, x.data(), n, nullptr, y.data(), pool);
    EXPECT_EQ(bit_mismatches(y, expect), 0) << ggml_q8_0::path_name();
    // the scalar reference, row by row
    const size_t ab = quant::act_row_bytes(GgmlType::Q8_0, kCols);
    std::vector<uint8_t> act(ab * size_t(n));
    for (int i = 0; i < n; ++i)
      quant::quantize_act_ref(GgmlType::Q8_0, x.data() + i * kCols, act.data() + ab * size_t(i),
                              kCols);
    ggml_q8_0::rows_ref(kCols, w.data, w.row_bytes, 0, kRows, act.data(), ab, n, y.data(), kRows);
    EXPECT_EQ(bit_mismatches(y, expect), 0) << "rows_ref";
  }
  std::printf("default path: %d of %d outputs differ from ggml's in some bit\n", default_mismatches,
              kRows * (1 + kActRows));
  EXPECT_GT(default_mismatches, 0) << "the fixture does not tell the orders apart";
}

// rows_avx2 equals rows_ref bit for bit on seeded rows: every tile size (1 to 4 activation rows
// and a remainder), widths of 1 to 40 blocks, quants over the whole range, scales from f16
// subnormals to 2^4.
TEST(GgmlQ8_0, Avx2KernelEqualsTheReferenceBitForBit) {
  if (cpu_isa_level() < IsaLevel::Avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(49);
  for (int64_t cols : {32, 64, 96, 896, 1280}) {
    for (int n_act : {1, 2, 3, 4, 5, 9}) {
      const int64_t rows = 21, nb = cols / 32;
      std::vector<BlockQ8_0> w(size_t(rows * nb)), a(size_t(n_act * nb));
      auto fill = [&](std::vector<BlockQ8_0>& v) {
        for (BlockQ8_0& b : v) {
          b.d = uint16_t(std::uniform_int_distribution<int>(0x0001, 0x4c00)(rng));
          for (int8_t& q : b.qs) q = int8_t(std::uniform_int_distribution<int>(-127, 127)(rng));
        }
      };
      fill(w);
      fill(a);
      std::vector<float> y0(size_t(n_act * rows)), y1(y0.size());
      const auto* wb = reinterpret_cast<const uint8_t*>(w.data());
      const auto* ab = reinterpret_cast<const uint8_t*>(a.data());
      ggml_q8_0::rows_ref(cols, wb, nb * 34, 0, rows, ab, nb * 34, n_act, y0.data(), rows);
      ggml_q8_0::rows_avx2(cols, wb, nb * 34, 0, rows, ab, nb * 34, n_act, y1.data(), rows);
      EXPECT_EQ(bit_mismatches(y0, y1.data()), 0) << cols << " cols, " << n_act << " rows";
    }
  }
}

// The f16 table equals ggml's for every f16 input (ggml_geglu_split(x, 1) over all 65536 values),
// and gelu_tanh_mul_ggml equals ggml_geglu_split(x, g) on f32 inputs off the f16 grid, the
// thresholds at -10 and 10 included. kamera's f32 GELU differs from both.
TEST(GgmlGelu, RoundsAsGgmlsCpuBackendBitForBit) {
  const auto table = read_file<uint16_t>("ggml_gelu.f16", 65536);
  int table_mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float x = f16_to_f32(uint16_t(h));
    if (std::isnan(x)) continue;  // NaN in, NaN out: its bits are not a rounding
    float gate = x;
    const float one = 1.0f;
    gelu_tanh_mul_ggml(&gate, &one, 1);
    table_mismatches += f32_to_f16(gate) != table[h] || f16_to_f32(table[h]) != gate;
  }
  EXPECT_EQ(table_mismatches, 0);
  const auto sweep = read_file<float>("ggml_gelu_sweep.f32", kGeluSweep);
  std::vector<float> gate(kGeluSweep), up(kGeluSweep), f32_gate;
  for (int i = 0; i < kGeluSweep; ++i) {
    gate[size_t(i)] = gelu_x(i);
    up[size_t(i)] = gelu_g(i);
  }
  f32_gate = gate;
  gelu_tanh_mul_ggml(gate.data(), up.data(), kGeluSweep);
  EXPECT_EQ(bit_mismatches(gate, sweep.data()), 0);
  gelu_tanh_mul(f32_gate.data(), up.data(), kGeluSweep);
  const int f32_mismatches = bit_mismatches(f32_gate, sweep.data());
  std::printf("f32 GELU: %d of %d sweep values differ from ggml's\n", f32_mismatches, kGeluSweep);
  EXPECT_GT(f32_mismatches, kGeluSweep / 2);
}

}  // namespace
}  // namespace kamera
