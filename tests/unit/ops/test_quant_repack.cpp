// Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS weights repacked in groups of 16 rows
// (ops/quant_repack.h): the bytes round-trip, and decode on every kernel path (the VNNI or AVX2
// kernel for the layout, the unpacking fallback elsewhere) matches the scalar reference dots of the
// file's rows; prefill and row lookups give exactly what the file's layout gives; the loader
// repacks only where the decode path streams it and the model's outputs do not change.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "model/weight.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"
#include "ops/quant_kernels.h"
#include "ops/quant_ref.h"
#include "ops/quant_repack.h"
#include "support/quant_data.h"
#include "support/quant_paths.h"
#include "support/shell.h"
#include "support/temp_path.h"

namespace kamera::quant {
namespace {

struct Shape {
  int64_t rows, cols;
};
// Per type: one group of one block, several groups, the 0.5b shapes' column counts (the
// k-quants need whole super-blocks of 256).
struct Case {
  GgmlType type;
  WeightLayout layout;
  std::vector<Shape> shapes;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {GgmlType::Q8_0,
       WeightLayout::Q8_0x16,
       {{16, 32}, {48, 64}, {32, 896}, {16, 4864}, {80, 160}, {896, 4864}, {4864, 896}}},
      {GgmlType::Q4_0,
       WeightLayout::Q4_0x16,
       {{16, 32}, {48, 64}, {32, 896}, {16, 4864}, {80, 160}, {4864, 896}}},
      {GgmlType::IQ4_NL,
       WeightLayout::IQ4_NLx16,
       {{16, 32}, {48, 64}, {32, 896}, {16, 4864}, {80, 160}, {4864, 896}}},
      {GgmlType::Q5_0,
       WeightLayout::Q5_0x16,
       {{16, 32}, {48, 64}, {32, 896}, {16, 4864}, {80, 160}, {4864, 896}}},
      {GgmlType::Q5_1,
       WeightLayout::Q5_1x16,
       {{16, 32}, {48, 64}, {32, 896}, {16, 4864}, {80, 160}, {4864, 896}}},
      {GgmlType::Q4_K, WeightLayout::Q4_Kx16, {{16, 256}, {48, 512}, {32, 4864}, {896, 4864}}},
      {GgmlType::Q5_K, WeightLayout::Q5_Kx16, {{16, 256}, {48, 512}, {32, 4864}, {896, 4864}}},
      {GgmlType::Q6_K, WeightLayout::Q6_Kx16, {{16, 256}, {48, 512}, {32, 4864}, {896, 4864}}},
      {GgmlType::IQ4_XS, WeightLayout::IQ4_XSx16, {{16, 256}, {48, 512}, {32, 4864}, {896, 4864}}},
  };
  return c;
}

std::string name_of(const Case& c, const Shape& s) {
  return ggml_type_name(c.type) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols);
}

WeightView view_of(GgmlType t, const std::vector<uint8_t>& bytes, const Shape& s) {
  auto v = make_weight_view(t, bytes.data(), s.rows, s.cols);
  EXPECT_TRUE(v.ok());
  return *v;
}

std::vector<uint8_t> repack_all(const WeightView& v) {
  std::vector<uint8_t> out(x16_bytes(v));
  repack_x16(v, 0, x16_group_count(v.rows), out.data());
  return out;
}

WeightView repacked_view(const WeightView& v, const std::vector<uint8_t>& bytes) {
  WeightView r = v;
  r.data = bytes.data();
  r.layout = x16_layout_of(v.type);
  return r;
}

TEST(QuantRepack, EveryByteRoundTrips) {
  for (const Case& c : cases()) {
    EXPECT_EQ(x16_layout_of(c.type), c.layout);
    for (const Shape& s : c.shapes) {
      SCOPED_TRACE(name_of(c, s));
      const auto w = quant_data::random_rows(c.type, s.rows, s.cols, 7);
      const WeightView v = view_of(c.type, w, s);
      ASSERT_TRUE(x16_fits(v));
      const auto packed = repack_all(v);
      EXPECT_NE(packed, w);  // another order
      std::vector<uint8_t> back(w.size());
      unpack_x16_rows(repacked_view(v, packed), 0, s.rows, back.data());
      EXPECT_EQ(back, w);
      // A few rows from inside a group.
      std::vector<uint8_t> some(3 * v.row_bytes);
      unpack_x16_rows(repacked_view(v, packed), 5, 3, some.data());
      EXPECT_TRUE(std::equal(some.begin(), some.end(), w.begin() + 5 * v.row_bytes));
    }
  }
  // Types without a layout, a repacked view: not repacked.
  const auto q4 = quant_data::random_rows(GgmlType::Q4_1, 16, 64, 7);
  EXPECT_FALSE(x16_fits(view_of(GgmlType::Q4_1, q4, {16, 64})));
  const auto q8 = quant_data::random_rows(GgmlType::Q8_0, 16, 64, 7);
  const auto packed = repack_all(view_of(GgmlType::Q8_0, q8, {16, 64}));
  EXPECT_FALSE(x16_fits(repacked_view(view_of(GgmlType::Q8_0, q8, {16, 64}), packed)));
}

// n activation rows quantized to t's dot type, and the reference dots of every weight row.
struct Acts {
  std::vector<float> x;
  std::vector<uint8_t> q;
  size_t row_bytes;
};
Acts acts_for(GgmlType t, int n, int64_t cols, uint32_t seed) {
  Acts a{quant_data::random_activations(n * cols, seed), {}, act_row_bytes(t, cols)};
  a.q.resize(a.row_bytes * size_t(n));
  for (int i = 0; i < n; ++i)
    quantize_act_ref(dot_type_of(t), a.x.data() + i * cols, a.q.data() + a.row_bytes * i, cols);
  return a;
}

// Decode (1 to 4 activation rows) on each path against vec_dot_ref over the file's rows: the
// integer sums are exact, so only the float order of the block sums differs.
TEST(QuantRepack, DecodeMatchesTheScalarReferenceOnEveryPath) {
  ThreadPool pool(2);
  for (const Case& c : cases())
    for (const Shape& s : c.shapes) {
      const auto w = quant_data::random_rows(c.type, s.rows, s.cols, 11);
      const WeightView v = view_of(c.type, w, s);
      const auto packed = repack_all(v);
      const WeightView rv = repacked_view(v, packed);
      for (int n = 1; n <= int(kQuantDecodeMaxRows); ++n) {
        const Acts a = acts_for(c.type, n, s.cols, uint32_t(20 + n));
        std::vector<float> ref(size_t(n * s.rows));
        for (int i = 0; i < n; ++i)
          for (int64_t r = 0; r < s.rows; ++r)
            ref[i * s.rows + r] =
                vec_dot_ref(c.type, s.cols, v.row(r), a.q.data() + a.row_bytes * i);
        for (const QuantKernels* k : supported_quant_paths()) {
          SCOPED_TRACE(std::string(k->name) + " " + name_of(c, s) + " n=" + std::to_string(n));
          std::vector<float> got(ref.size(), 1e30f);
          matmul_with(*k, *k, rv, a.x.data(), n, nullptr, got.data(), pool);
          EXPECT_LE(quant_data::nmse(got.data(), ref.data(), int64_t(ref.size())), 1e-10);
        }
      }
    }
}

// The layout's kernel writes the rows of the groups it is given and no others, each within
// float rounding of the reference dot.
TEST(QuantRepack, KernelWritesOnlyItsGroups) {
  int tested = 0;
  for (const Case& c : cases()) {
    const Shape s{48, c.shapes[1].cols};
    const auto w = quant_data::random_rows(c.type, s.rows, s.cols, 3);
    const WeightView v = view_of(c.type, w, s);
    const auto packed = repack_all(v);
    const Acts a = acts_for(c.type, 2, s.cols, 4);
    std::vector<int32_t> sums(2 * s.cols / 32);
    if (dot_type_of(c.type) == GgmlType::Q8_0)
      for (int i = 0; i < 2; ++i)
        q8_0_block_sums(a.q.data() + a.row_bytes * i, s.cols, sums.data() + i * s.cols / 32);
    for (const QuantKernels* k : supported_quant_paths()) {
      if (k->has_x16 == nullptr || !k->has_x16(c.layout)) continue;
      SCOPED_TRACE(std::string(k->name) + " " + name_of(c, s));
      ++tested;
      std::vector<float> y(2 * s.rows, 1e30f);
      k->vec_dot_x16(c.layout, s.cols, packed.data(), 1, 2, a.q.data(), a.row_bytes, sums.data(), 2,
                     y.data(), s.rows);
      for (int i = 0; i < 2; ++i)
        for (int64_t r = 0; r < s.rows; ++r) {
          if (r >= 16 && r < 32) {
            const float ref = vec_dot_ref(c.type, s.cols, v.row(r), a.q.data() + a.row_bytes * i);
            EXPECT_NEAR(y[i * s.rows + r], ref, 1e-5 * (1 + std::abs(ref)));
          } else {
            EXPECT_EQ(y[i * s.rows + r], 1e30f);
          }
        }
    }
  }
  // Every layout has a kernel on the avx2 table (issue 51) and on the vnni, bf16 and amx tables;
  // none on scalar and avx512 (which unpack the groups).
  int want = 0;
  for (const QuantKernels* k : supported_quant_paths()) {
    const bool has = k->level == IsaLevel::Avx2 || k->level >= IsaLevel::Avx512Vnni;
    for (const Case& c : cases())
      EXPECT_EQ(k->has_x16 != nullptr && k->has_x16(c.layout), has)
          << k->name << " " << ggml_type_name(c.type);
    want += has ? int(cases().size()) : 0;
  }
  EXPECT_EQ(tested, want);
  if (cpu_isa_level() >= IsaLevel::Avx2) {
    EXPECT_GE(tested, int(cases().size()));
  }
}

// y = the path's dots of n activation rows (a, with their q8_0 block sums where t's dot type is
// q8_0) against every row of w: the layout's kernel over the repacked groups (x16), or the file's
// rows.
std::vector<float> path_dots(const QuantKernels& k, const WeightView& v, const WeightView& rv,
                             const Acts& a, int n, bool x16) {
  std::vector<int32_t> sums(size_t(n * v.cols / 32));
  if (dot_type_of(v.type) == GgmlType::Q8_0)
    for (int i = 0; i < n; ++i)
      q8_0_block_sums(a.q.data() + a.row_bytes * i, v.cols, sums.data() + i * v.cols / 32);
  std::vector<float> y(size_t(n * v.rows), 1e30f);
  if (x16) {
    k.vec_dot_x16(rv.layout, v.cols, rv.data, 0, v.rows / kRepackRows, a.q.data(), a.row_bytes,
                  sums.data(), n, y.data(), v.rows);
  } else {
    k.vec_dot_rows(v.type, v.cols, v.data, v.row_bytes, 0, v.rows, a.q.data(), a.row_bytes, n,
                   y.data(), v.rows);
  }
  return y;
}

// A case's random weights in the file's rows and repacked (the views point into the vectors,
// whose buffers a move keeps).
struct Packed {
  std::vector<uint8_t> w, packed;
  WeightView v, rv;
};
Packed packed_case(const Case& c, const Shape& s, uint32_t seed) {
  Packed p;
  p.w = quant_data::random_rows(c.type, s.rows, s.cols, seed);
  p.v = view_of(c.type, p.w, s);
  p.packed = repack_all(p.v);
  p.rv = repacked_view(p.v, p.packed);
  return p;
}

// acts_for's rows with row 0 at full scale (every quant +-127: the largest products).
Acts acts_full_scale_first(GgmlType t, int n, int64_t cols, uint32_t seed) {
  Acts a = acts_for(t, n, cols, seed);
  for (int64_t j = 0; j < cols; ++j) a.x[j] = j % 3 == 0 ? -1.0f : 1.0f;
  quantize_act_ref(dot_type_of(t), a.x.data(), a.q.data(), cols);
  return a;
}

// The avx2_vnni path (vpdpbusd: int32 sums, signed weights as unsigned bytes plus an offset) sums
// the same integers as the avx2 path (maddubs, bounded so that no int16 sum saturates), so every
// layout's kernel, and the file rows' dots, give the avx2 floats to the bit, and the scalar
// reference's dots to float rounding. Activation row 0 is at full scale (every quant +-127: the
// largest products), the others random.
TEST(QuantRepack, AvxVnniGivesTheAvx2ResultsToTheBit) {
  if (!cpu_supports(avx2_vnni_kernels()))
    GTEST_SKIP() << "CPU without AVX-VNNI (cpu features: " << cpu_feature_string() << ")";
  const QuantKernels &plain = avx2_kernels(), &vnni = avx2_vnni_kernels();
  int compared = 0;
  for (const Case& c : cases())
    for (const Shape& s : c.shapes)
      for (int n : {1, 3, 4, 6}) {
        const Packed p = packed_case(c, s, 13);
        const WeightView &v = p.v, &rv = p.rv;
        const Acts a = acts_full_scale_first(c.type, n, s.cols, uint32_t(50 + n));
        std::vector<float> ref(size_t(n * s.rows));
        for (int i = 0; i < n; ++i)
          for (int64_t r = 0; r < s.rows; ++r)
            ref[i * s.rows + r] =
                vec_dot_ref(c.type, s.cols, v.row(r), a.q.data() + a.row_bytes * i);
        for (bool x16 : {true, false}) {
          SCOPED_TRACE(name_of(c, s) + " n=" + std::to_string(n) + (x16 ? " x16" : " rows"));
          const auto want = path_dots(plain, v, rv, a, n, x16);
          const auto got = path_dots(vnni, v, rv, a, n, x16);
          EXPECT_EQ(got, want);
          EXPECT_LE(quant_data::nmse(got.data(), ref.data(), int64_t(ref.size())), 1e-10);
          ++compared;
        }
      }
  size_t shapes = 0;
  for (const Case& c : cases()) shapes += c.shapes.size();
  EXPECT_EQ(compared, int(2 * 4 * shapes));  // every shape, 4 row counts, both layouts
}

// The amx path's prefill kernel (int8 products on AMX tiles, 16 activation rows at a time)
// sums the same integers as avx512_vnni's dpbusd and scales them in the same float steps, so it
// gives avx512_vnni's floats to the bit on every layout: 16 and 48 rows (whole tiles), 35 (two
// tiles and 3 rows through the vnni kernel), 112 (two activation chunks where a row holds 4864
// values), and a call over groups [1, end) (its y offsets).
// Row 0 is at full scale (every quant +-127), the others random.
TEST(QuantRepack, AmxTilesGiveTheVnniResultsToTheBit) {
  if (!cpu_supports(amx_kernels()) || !cpu_features().amx_int8)
    GTEST_SKIP() << "CPU without AMX (cpu features: " << cpu_feature_string() << ")";
  const QuantKernels &vnni = avx512_vnni_kernels(), &amx = amx_kernels();
  int compared = 0;
  for (const Case& c : cases())
    for (const Shape& s : c.shapes)
      for (int n : {16, 35, 48, 112}) {
        const Packed p = packed_case(c, s, 17);
        const WeightView &v = p.v, &rv = p.rv;
        const Acts a = acts_full_scale_first(c.type, n, s.cols, uint32_t(70 + n));
        SCOPED_TRACE(name_of(c, s) + " n=" + std::to_string(n));
        const auto want = path_dots(vnni, v, rv, a, n, true);
        const auto got = path_dots(amx, v, rv, a, n, true);
        EXPECT_EQ(got, want);
        ++compared;
        const int64_t groups = s.rows / kRepackRows;
        if (groups < 2) continue;
        std::vector<int32_t> sums(size_t(n * s.cols / 32));
        if (dot_type_of(c.type) == GgmlType::Q8_0)
          for (int i = 0; i < n; ++i)
            q8_0_block_sums(a.q.data() + a.row_bytes * i, s.cols, sums.data() + i * s.cols / 32);
        std::vector<float> part_v(size_t(n * s.rows), 7.0f), part_a = part_v;
        for (auto [k, y] : {std::pair{&vnni, &part_v}, {&amx, &part_a}})
          k->vec_dot_x16(rv.layout, s.cols, rv.data, 1, groups, a.q.data(), a.row_bytes,
                         sums.data(), n, y->data(), s.rows);
        EXPECT_EQ(part_a, part_v);
        for (int i = 0; i < n; ++i)  // group 0's rows untouched
          EXPECT_EQ(part_a[size_t(i * s.rows)], 7.0f);
      }
  size_t shapes = 0;
  for (const Case& c : cases()) shapes += c.shapes.size();
  EXPECT_EQ(compared, int(4 * shapes));
}

// Row lookups dequantize the same values, so they are the file layout's to the bit. Prefill
// (17 rows) runs the layout's integer kernel where the decode path has one: the scalar
// reference's dots of the quantized activations to float rounding; elsewhere it dequantizes
// the same values as the file layout, to the bit.
TEST(QuantRepack, PrefillAndRowLookupsMatchTheFileLayouts) {
  ThreadPool pool(2);
  for (const Case& c : cases()) {
    const Shape s{80, c.shapes[1].cols};
    SCOPED_TRACE(name_of(c, s));
    const auto w = quant_data::random_rows(c.type, s.rows, s.cols, 5);
    auto src = Weight::borrow(c.type, w.data(), s.rows, s.cols);
    ASSERT_TRUE(src.ok());
    const Weight copy = Weight::copy_of(src->view());  // owned: nothing to release
    const Weight r = Weight::repacked(copy, c.layout);
    EXPECT_EQ(r.layout(), c.layout);
    EXPECT_TRUE(r.owned());
    EXPECT_EQ(r.bytes(), copy.bytes());
    EXPECT_EQ(r.to_f32(), copy.to_f32());
    EXPECT_FALSE(r.same_as(copy));
    const int n = 17;
    const Acts a = acts_for(c.type, n, s.cols, 9);
    std::vector<float> file(size_t(n * s.rows)), packed(file.size()), ref(file.size());
    matmul(copy.view(), a.x.data(), n, nullptr, file.data(), pool);
    matmul(r.view(), a.x.data(), n, nullptr, packed.data(), pool);
    if (decode_has_x16(c.layout)) {
      for (int i = 0; i < n; ++i)
        for (int64_t row = 0; row < s.rows; ++row)
          ref[i * s.rows + row] =
              vec_dot_ref(c.type, s.cols, copy.view().row(row), a.q.data() + a.row_bytes * i);
      EXPECT_LE(quant_data::nmse(packed.data(), ref.data(), int64_t(ref.size())), 1e-10);
      // The f32 prefill of the file layout differs by the activations' quantization only.
      EXPECT_LE(quant_data::nmse(packed.data(), file.data(), int64_t(ref.size())), 1e-3);
    } else {
      EXPECT_EQ(packed, file);
    }
  }
}

// A matrix whose rows are not a whole number of groups (an output matrix of 151,669 or 50,257
// rows) is repacked too: its last group padded with zero rows. Its rows round-trip, and its
// products at every activation count (decode; the layout's prefill kernel, AMX tiles included)
// are the file rows' to float rounding, writing nothing past the matrix's rows.
TEST(QuantRepack, RowsPastTheLastWholeGroupArePaddedAndDropped) {
  ThreadPool pool(2);
  const Shape s{53, 512};  // three groups and 5 rows
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q6_K,
                     GgmlType::IQ4_XS}) {
    SCOPED_TRACE(ggml_type_name(t));
    const auto w = quant_data::random_rows(t, s.rows, s.cols, 11);
    const WeightView v = view_of(t, w, s);
    ASSERT_TRUE(x16_fits(v));
    const auto packed = repack_all(v);
    EXPECT_EQ(packed.size(), size_t(64) * v.row_bytes);
    const WeightView rv = repacked_view(v, packed);
    std::vector<uint8_t> back(w.size());
    unpack_x16_rows(rv, 0, s.rows, back.data());
    EXPECT_EQ(back, w);
    for (int n : {1, 3, 9, 17, 40}) {
      const auto x = quant_data::random_activations(n * s.cols, 60 + n);
      const size_t out = size_t(n * s.rows);
      std::vector<float> want(out), got(out + 64, 7.0f);  // 64 sentinels past the end
      matmul(v, x.data(), n, nullptr, want.data(), pool);
      matmul(rv, x.data(), n, nullptr, got.data(), pool);
      for (size_t i = out; i < got.size(); ++i) ASSERT_EQ(got[i], 7.0f) << "written past the end";
      got.resize(out);
      EXPECT_LE(quant_data::nmse(got.data(), want.data(), int64_t(out)), 1e-10) << "n " << n;
    }
  }
}

// Several products of one input in one pass (matmul_many: mixed types and layouts, biases) give
// what each product alone gives, to the bit.
TEST(QuantRepack, ManyProductsMatchEachAlone) {
  ThreadPool pool(2);
  const int64_t cols = 512;
  std::vector<std::vector<uint8_t>> bytes, packed;
  std::vector<WeightView> views;
  const GgmlType types[] = {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_0,
                            GgmlType::Q5_0, GgmlType::Q5_K, GgmlType::Q5_1};
  const int64_t rows[] = {64, 32, 48, 40, 16, 32, 48};
  constexpr int kN = 7;
  for (int i = 0; i < kN; ++i)
    bytes.push_back(quant_data::random_rows(types[i], rows[i], cols, 30 + i));
  for (int i = 0; i < kN; ++i) {
    WeightView v = view_of(types[i], bytes[i], {rows[i], cols});
    if (i % 2 == 0 && x16_fits(v)) {  // some repacked, some not
      packed.push_back(repack_all(v));
      v = repacked_view(v, packed.back());
    }
    views.push_back(v);
  }
  const auto bias = quant_data::random_activations(64, 3);
  for (int n : {1, 3, 9}) {
    const auto x = quant_data::random_activations(n * cols, 40 + n);
    std::vector<std::vector<float>> alone(kN), together(kN);
    std::vector<Product> ps;
    for (int i = 0; i < kN; ++i) {
      alone[i].resize(size_t(n * rows[i]));
      together[i].assign(alone[i].size(), 1e30f);
      matmul(views[i], x.data(), n, i == 1 ? bias.data() : nullptr, alone[i].data(), pool);
      ps.push_back({&views[i], i == 1 ? bias.data() : nullptr, together[i].data()});
    }
    matmul_many(ps, x.data(), n, pool);
    for (int i = 0; i < kN; ++i) EXPECT_EQ(together[i], alone[i]) << "product " << i << " n " << n;
  }
}

// The loader repacks a Q8_0 model where the decode path has the kernel (unless KAMERA_REPACK=0),
// and the logits of both agree to float rounding; also with a vocabulary (the tied output
// matrix's rows) that is not a multiple of 16.
class QuantRepackModel : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Vocab, QuantRepackModel, ::testing::Values("512", "509"));

TEST_P(QuantRepackModel, ModelLogitsDoNotChange) {
  const std::string model = unique_temp("repack-q8.gguf");
  const std::string k = std::string(KAMERA_BINARY_DIR) + "/bin/kamera ";
  ASSERT_EQ(run_shell(k + "make-model --arch qwen2 --preset tiny --type q8_0 --dims vocab=" +
                      GetParam() + " -o " + model)
                .rc,
            0);
  auto logits = [&](const std::string& env) {
    const ShellOutput o =
        run_shell(env + k + "logits -m " + model + " --tokens 1,5,9,12 --all-positions --json");
    EXPECT_EQ(o.rc, 0) << o.err;
    return nlohmann::json::parse(o.out);
  };
  {
    auto m = load_model(model);
    ASSERT_TRUE(m.ok()) << m.message();
    const WeightLayout want =
        decode_has_x16(WeightLayout::Q8_0x16) ? WeightLayout::Q8_0x16 : WeightLayout::Rows;
    EXPECT_EQ((*m)->output_weight().layout(), want);
    EXPECT_EQ((*m)->layers[0].w_down.layout(), want);
  }
  {  // every repacked matrix in one block (model/repack.h): 64-byte aligned, back to back
    auto m = load_model(model);
    ASSERT_TRUE(m.ok()) << m.message();
    std::vector<const Weight*> ws;
    for (const LayerWeights& L : (*m)->layers)
      for (const Weight* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
        if (w->layout() != WeightLayout::Rows) ws.push_back(w);
    if ((*m)->output_weight().layout() != WeightLayout::Rows) ws.push_back(&(*m)->output_weight());
    for (size_t i = 0; i < ws.size(); ++i) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(ws[i]->raw()) % 64, 0u) << i;
      if (i > 0)  // right after the previous matrix's bytes, rounded up to 64
        EXPECT_EQ(ws[i]->raw(), ws[i - 1]->raw() + (x16_bytes(ws[i - 1]->view()) + 63) / 64 * 64)
            << i;
    }
  }
  const auto plain = logits("KAMERA_REPACK=0 "), packed = logits("");
  // The fingerprint hashes the file's bytes, before repacking: cache keys do not change.
  EXPECT_EQ(plain.at("model").at("fingerprint"), packed.at("model").at("fingerprint"));
  std::vector<float> a, b;
  for (const auto& row : plain.at("logits")) a.insert(a.end(), row.begin(), row.end());
  for (const auto& row : packed.at("logits")) b.insert(b.end(), row.begin(), row.end());
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  EXPECT_LE(quant_data::nmse(b.data(), a.data(), int64_t(a.size())), 1e-10);
  std::remove(model.c_str());
}

}  // namespace
}  // namespace kamera::quant
