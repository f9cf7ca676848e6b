// Q8_0 weights repacked into the Q8_0x16 layout (ops/quant_repack.h): the bytes round-trip, and
// decode on every kernel path (the VNNI kernel for the layout, the unpacking fallback elsewhere)
// matches the scalar reference dots of the file's rows; prefill and row lookups give exactly
// what the file's layout gives; the loader repacks only where the decode path streams it and
// the model's outputs do not change.
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
// One group of one block; several groups; the 0.5b shapes' column counts.
constexpr Shape kShapes[] = {{16, 32},  {48, 64},    {32, 896},  {16, 4864},
                             {80, 160}, {896, 4864}, {4864, 896}};

WeightView view_of(const std::vector<uint8_t>& bytes, const Shape& s) {
  auto v = make_weight_view(GgmlType::Q8_0, bytes.data(), s.rows, s.cols);
  EXPECT_TRUE(v.ok());
  return *v;
}

std::vector<uint8_t> repack_all(const WeightView& v) {
  std::vector<uint8_t> out(size_t(v.rows) * v.row_bytes);
  repack_q8_0x16(v, 0, v.rows / kQ8x16Rows, out.data());
  return out;
}

WeightView repacked_view(const WeightView& v, const std::vector<uint8_t>& bytes) {
  WeightView r = v;
  r.data = bytes.data();
  r.layout = WeightLayout::Q8_0x16;
  return r;
}

TEST(QuantRepack, EveryByteRoundTrips) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.cols));
    const auto w = quant_data::random_rows(GgmlType::Q8_0, s.rows, s.cols, 7);
    const WeightView v = view_of(w, s);
    ASSERT_TRUE(q8_0x16_fits(v));
    const auto packed = repack_all(v);
    EXPECT_NE(packed, w);  // another order
    std::vector<uint8_t> back(w.size());
    unpack_q8_0x16_rows(repacked_view(v, packed), 0, s.rows, back.data());
    EXPECT_EQ(back, w);
    // A few rows from inside a group.
    std::vector<uint8_t> some(3 * v.row_bytes);
    unpack_q8_0x16_rows(repacked_view(v, packed), 5, 3, some.data());
    EXPECT_TRUE(std::equal(some.begin(), some.end(), w.begin() + 5 * v.row_bytes));
  }
  // Rows not a whole number of groups, other types, a repacked view: not repacked.
  const auto w = quant_data::random_rows(GgmlType::Q8_0, 53, 64, 7);
  EXPECT_FALSE(q8_0x16_fits(view_of(w, {53, 64})));
  const auto q4 = quant_data::random_rows(GgmlType::Q4_0, 16, 64, 7);
  EXPECT_FALSE(q8_0x16_fits(*make_weight_view(GgmlType::Q4_0, q4.data(), 16, 64)));
}

// Decode (1 to 4 activation rows) on each path against vec_dot_ref over the file's rows: the
// integer sums are exact, so only the float order of the block sums differs.
TEST(QuantRepack, DecodeMatchesTheScalarReferenceOnEveryPath) {
  ThreadPool pool(2);
  for (const Shape& s : kShapes) {
    const auto w = quant_data::random_rows(GgmlType::Q8_0, s.rows, s.cols, 11);
    const WeightView v = view_of(w, s);
    const auto packed = repack_all(v);
    const WeightView rv = repacked_view(v, packed);
    for (int n = 1; n <= int(kQuantDecodeMaxRows); ++n) {
      const auto x = quant_data::random_activations(n * s.cols, uint32_t(20 + n));
      const size_t ab = act_row_bytes(GgmlType::Q8_0, s.cols);
      std::vector<uint8_t> act(ab * size_t(n));
      for (int a = 0; a < n; ++a)
        quantize_act_ref(GgmlType::Q8_0, x.data() + a * s.cols, act.data() + ab * a, s.cols);
      std::vector<float> ref(size_t(n * s.rows));
      for (int a = 0; a < n; ++a)
        for (int64_t r = 0; r < s.rows; ++r)
          ref[a * s.rows + r] = vec_dot_ref(GgmlType::Q8_0, s.cols, v.row(r), act.data() + ab * a);
      for (const QuantKernels* k : supported_quant_paths()) {
        SCOPED_TRACE(std::string(k->name) + " " + std::to_string(s.rows) + "x" +
                     std::to_string(s.cols) + " n=" + std::to_string(n));
        std::vector<float> got(ref.size(), 1e30f);
        matmul_with(*k, *k, rv, x.data(), n, nullptr, got.data(), pool);
        EXPECT_LE(quant_data::nmse(got.data(), ref.data(), int64_t(ref.size())), 1e-10);
      }
    }
  }
}

// The layout's kernel writes the rows of the groups it is given and no others.
TEST(QuantRepack, KernelWritesOnlyItsGroups) {
  const Shape s{48, 96};
  const auto w = quant_data::random_rows(GgmlType::Q8_0, s.rows, s.cols, 3);
  const WeightView v = view_of(w, s);
  const auto packed = repack_all(v);
  const auto x = quant_data::random_activations(2 * s.cols, 4);
  const size_t ab = act_row_bytes(GgmlType::Q8_0, s.cols);
  std::vector<uint8_t> act(2 * ab);
  std::vector<int32_t> sums(2 * s.cols / 32);
  for (int a = 0; a < 2; ++a) {
    quantize_act_ref(GgmlType::Q8_0, x.data() + a * s.cols, act.data() + ab * a, s.cols);
    q8_0_block_sums(act.data() + ab * a, s.cols, sums.data() + a * s.cols / 32);
  }
  int tested = 0;
  for (const QuantKernels* k : supported_quant_paths()) {
    if (k->vec_dot_q8_0x16 == nullptr) continue;
    SCOPED_TRACE(k->name);
    ++tested;
    std::vector<float> y(2 * s.rows, 1e30f);
    k->vec_dot_q8_0x16(s.cols, packed.data(), 1, 2, act.data(), ab, sums.data(), 2, y.data(),
                       s.rows);
    for (int a = 0; a < 2; ++a)
      for (int64_t r = 0; r < s.rows; ++r) {
        if (r >= 16 && r < 32) {
          const float ref = vec_dot_ref(GgmlType::Q8_0, s.cols, v.row(r), act.data() + ab * a);
          EXPECT_NEAR(y[a * s.rows + r], ref, 1e-5 * (1 + std::abs(ref)));
        } else {
          EXPECT_EQ(y[a * s.rows + r], 1e30f);
        }
      }
  }
  if (cpu_isa_level() >= IsaLevel::Avx512Vnni) {
    EXPECT_GT(tested, 0);
  }
}

// Prefill dequantizes the same values, so the product is the same to the bit; row lookups too.
TEST(QuantRepack, PrefillAndRowLookupsAreExactlyTheFileLayouts) {
  ThreadPool pool(2);
  const Shape s{80, 160};
  const auto w = quant_data::random_rows(GgmlType::Q8_0, s.rows, s.cols, 5);
  auto src = Weight::borrow(GgmlType::Q8_0, w.data(), s.rows, s.cols);
  ASSERT_TRUE(src.ok());
  const Weight copy = Weight::copy_of(src->view());  // owned: nothing to release
  const Weight r = Weight::repacked(copy, WeightLayout::Q8_0x16);
  EXPECT_EQ(r.layout(), WeightLayout::Q8_0x16);
  EXPECT_TRUE(r.owned());
  EXPECT_EQ(r.bytes(), copy.bytes());
  EXPECT_EQ(r.to_f32(), copy.to_f32());
  EXPECT_FALSE(r.same_as(copy));
  const int n = 17;
  const auto x = quant_data::random_activations(n * s.cols, 9);
  std::vector<float> a(size_t(n * s.rows)), b(a.size());
  matmul(copy.view(), x.data(), n, nullptr, a.data(), pool);
  matmul(r.view(), x.data(), n, nullptr, b.data(), pool);
  EXPECT_EQ(a, b);
}

// The loader repacks a Q8_0 model where the decode path has the kernel (unless KAMERA_REPACK=0),
// and the logits of both agree to float rounding.
TEST(QuantRepack, ModelLogitsDoNotChange) {
  const std::string model = unique_temp("repack-q8.gguf");
  const std::string k = std::string(KAMERA_BINARY_DIR) + "/bin/kamera ";
  ASSERT_EQ(run_shell(k + "make-model --arch qwen2 --preset tiny --type q8_0 -o " + model).rc, 0);
  auto logits = [&](const std::string& env) {
    const ShellOutput o =
        run_shell(env + k + "logits -m " + model + " --tokens 1,5,9,12 --all-positions --json");
    EXPECT_EQ(o.rc, 0) << o.err;
    return nlohmann::json::parse(o.out);
  };
  {
    auto m = load_model(model);
    ASSERT_TRUE(m.ok()) << m.message();
    const WeightLayout want = decode_has_q8_0x16() ? WeightLayout::Q8_0x16 : WeightLayout::Rows;
    EXPECT_EQ((*m)->output_weight().layout(), want);
    EXPECT_EQ((*m)->layers[0].w_down.layout(), want);
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
