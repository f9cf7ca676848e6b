// The avx2 and avx2_vnni paths' prefill kernel over repacked weights (vec_dot_x16_gemm,
// ops/quant_x16_avx2_gemm.inc), table-driven over every layout: 1 to 17 activation rows
// (every remainder of its row tiles), odd block counts (one block, odd counts, more than one
// column chunk, more than one activation chunk), a call over groups [1, end). Its floats are the
// decode kernel's (vec_dot_x16 one activation row at a time) to the bit, within float rounding of
// the scalar reference's dots of the file's rows, and vec_dot_x16 hands it the calls from
// kX16GemmMinRows rows on. Activation row 0 is at full scale (every quant +-127: the largest int16
// sums).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"
#include "ops/quant_kernels.h"
#include "ops/quant_ref.h"
#include "ops/quant_repack.h"
#include "support/quant_data.h"

namespace kamera::quant {
namespace {

struct GemmCase {
  GgmlType type;
  int64_t rows;
  std::vector<int64_t> blocks;  // block columns per case (odd, past one column chunk, chunk edges)
};

// 32-value blocks go 32 to a column chunk (Q8_0 on plain AVX2, its int16 path: 16, so 16 and 48
// end on a chunk's edge), super-blocks 4; Q8_0's 705 blocks (24 KB activation rows, 47 KB as
// int16) split the 17 activation rows into chunks of 6 (avx2) or 12 (avx2_vnni).
const std::vector<GemmCase>& gemm_cases() {
  static const std::vector<GemmCase> c = {
      {GgmlType::Q8_0, 48, {1, 3, 16, 29, 37, 48, 705}},
      {GgmlType::Q4_0, 48, {1, 5, 33}},
      {GgmlType::IQ4_NL, 48, {1, 5, 33}},
      {GgmlType::Q5_0, 48, {1, 5, 33}},
      {GgmlType::Q5_1, 48, {1, 5, 33}},
      {GgmlType::Q4_K, 48, {1, 3, 5, 19}},
      {GgmlType::Q5_K, 48, {1, 3, 5}},
      {GgmlType::Q6_K, 48, {1, 3, 5}},
      {GgmlType::IQ4_XS, 48, {1, 3, 5}},
  };
  return c;
}

struct Data {
  std::vector<uint8_t> w, packed;
  WeightView rv;
  std::vector<uint8_t> q;     // n activation rows in the dot type
  std::vector<int32_t> sums;  // their q8_0 block sums (q8_0 dot types)
  size_t act_bytes = 0;
  std::vector<float> ref;  // vec_dot_ref of every (activation row, weight row)
};

Data make_data(GgmlType t, int64_t rows, int64_t cols, int n, uint32_t seed) {
  Data d;
  d.w = quant_data::random_rows(t, rows, cols, seed);
  auto v = make_weight_view(t, d.w.data(), rows, cols);
  EXPECT_TRUE(v.ok());
  d.packed.resize(x16_bytes(*v));
  repack_x16(*v, 0, x16_group_count(rows), d.packed.data());
  d.rv = *v;
  d.rv.data = d.packed.data();
  d.rv.layout = x16_layout_of(t);
  std::vector<float> x = quant_data::random_activations(n * cols, seed + 1);
  for (int64_t j = 0; j < cols; ++j) x[size_t(j)] = j % 3 == 0 ? -1.0f : 1.0f;
  d.act_bytes = act_row_bytes(t, cols);
  d.q.resize(d.act_bytes * size_t(n));
  d.sums.resize(size_t(n * cols / 32));
  for (int i = 0; i < n; ++i) {
    uint8_t* row = d.q.data() + d.act_bytes * size_t(i);
    quantize_act_ref(dot_type_of(t), x.data() + i * cols, row, cols);
    if (dot_type_of(t) == GgmlType::Q8_0) q8_0_block_sums(row, cols, d.sums.data() + i * cols / 32);
  }
  d.ref.resize(size_t(n * rows));
  for (int i = 0; i < n; ++i)
    for (int64_t r = 0; r < rows; ++r)
      d.ref[size_t(i * rows + r)] =
          vec_dot_ref(t, cols, v->row(r), d.q.data() + d.act_bytes * size_t(i));
  return d;
}

// The decode kernel's dots, one activation row per call, for groups [g0, g1) (y: NaN elsewhere).
std::vector<float> decode_rows(const QuantKernels& k, const Data& d, int n, int64_t g0,
                               int64_t g1) {
  const WeightView& v = d.rv;
  std::vector<float> y(size_t(n * v.rows), 1e30f);
  const int64_t per_row = v.cols / 32;
  for (int i = 0; i < n; ++i)
    k.vec_dot_x16(v.layout, v.cols, v.data, g0, g1, d.q.data() + d.act_bytes * size_t(i),
                  d.act_bytes, d.sums.data() + i * per_row, 1, y.data() + i * v.rows, v.rows);
  return y;
}

std::vector<const QuantKernels*> avx2_paths() {
  std::vector<const QuantKernels*> out;
  for (const QuantKernels* k : {&avx2_kernels(), &avx2_vnni_kernels()})
    if (cpu_supports(*k)) out.push_back(k);
  return out;
}

TEST(QuantX16Gemm, GivesTheDecodeKernelsFloatsOnEveryLayout) {
  const auto paths = avx2_paths();
  if (paths.empty()) GTEST_SKIP() << "CPU without AVX2 (" << cpu_feature_string() << ")";
  int compared = 0, expected = 0;
  for (const GemmCase& c : gemm_cases())
    for (int64_t blocks : c.blocks) {
      const int64_t cols = blocks * ggml_block_size(c.type);
      const int n = 17;
      const Data d = make_data(c.type, c.rows, cols, n, uint32_t(blocks * 7 + int(c.type)));
      const int64_t groups = c.rows / kRepackRows;
      for (const QuantKernels* k : paths) {
        ASSERT_NE(k->vec_dot_x16_gemm, nullptr) << k->name;
        ASSERT_TRUE(k->has_x16(d.rv.layout));
        const std::vector<float> want = decode_rows(*k, d, n, 0, groups);
        EXPECT_LE(quant_data::nmse(want.data(), d.ref.data(), int64_t(want.size())), 1e-10);
        for (int m = 1; m <= n; ++m) {
          expected += 2;
          SCOPED_TRACE(std::string(k->name) + " " + ggml_type_name(c.type) + " cols " +
                       std::to_string(cols) + " rows " + std::to_string(m));
          // The first m activation rows: the kernel itself, and vec_dot_x16's dispatch.
          std::vector<float> got(size_t(m * c.rows), 1e30f), via = got;
          k->vec_dot_x16_gemm(d.rv.layout, cols, d.rv.data, 0, groups, d.q.data(), d.act_bytes,
                              d.sums.data(), m, got.data(), c.rows);
          k->vec_dot_x16(d.rv.layout, cols, d.rv.data, 0, groups, d.q.data(), d.act_bytes,
                         d.sums.data(), m, via.data(), c.rows);
          const std::vector<float> head(want.begin(), want.begin() + m * c.rows);
          compared += got == head;
          compared += via == head;
          EXPECT_EQ(got, head);
          EXPECT_EQ(via, head);
        }
        // Groups [1, end): the same floats there, the first group's rows untouched.
        std::vector<float> part(size_t(n * c.rows), 7.0f);
        k->vec_dot_x16_gemm(d.rv.layout, cols, d.rv.data, 1, groups, d.q.data(), d.act_bytes,
                            d.sums.data(), n, part.data(), c.rows);
        int64_t wrong = 0;
        for (int i = 0; i < n; ++i)
          for (int64_t r = 0; r < c.rows; ++r) {
            const size_t at = size_t(i * c.rows + r);
            wrong += part[at] != (r < kRepackRows ? 7.0f : want[at]);
          }
        EXPECT_EQ(wrong, 0) << k->name << " " << ggml_type_name(c.type) << " groups [1, end)";
      }
    }
  EXPECT_GT(expected, 0);
  EXPECT_EQ(compared, expected);
}

// The model's matmul over a repacked view with 1 to 17 activation rows: each row's outputs are
// the one-row decode's to the bit (prefill and decode agree, whichever kernel runs).
TEST(QuantX16Gemm, MatmulRowsMatchOneRowDecodes) {
  const auto paths = avx2_paths();
  if (paths.empty()) GTEST_SKIP() << "CPU without AVX2 (" << cpu_feature_string() << ")";
  ThreadPool pool(2);
  for (const GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    const int64_t cols = t == GgmlType::Q8_0 ? 96 : 768, rows = 48;
    const int n = 17;
    const auto w = quant_data::random_rows(t, rows, cols, 5);
    auto v = make_weight_view(t, w.data(), rows, cols);
    ASSERT_TRUE(v.ok());
    std::vector<uint8_t> packed(x16_bytes(*v));
    repack_x16(*v, 0, x16_group_count(rows), packed.data());
    WeightView rv = *v;
    rv.data = packed.data();
    rv.layout = x16_layout_of(t);
    const std::vector<float> x = quant_data::random_activations(n * cols, 9);
    for (const QuantKernels* k : paths) {
      SCOPED_TRACE(std::string(k->name) + " " + ggml_type_name(t));
      std::vector<float> all(size_t(n * rows));
      matmul_with(*k, *k, rv, x.data(), n, nullptr, all.data(), pool);
      for (int i = 0; i < n; ++i) {
        std::vector<float> one(static_cast<size_t>(rows));
        matmul_with(*k, *k, rv, x.data() + i * cols, 1, nullptr, one.data(), pool);
        EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + i * rows)) << "row " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kamera::quant
