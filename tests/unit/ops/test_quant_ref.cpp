// The weight-type layer's oracle: type traits, scalar dequantization bit-exact against fixtures
// from an independent implementation (llama.cpp's gguf-py; tests/data/quant/make_fixtures.py),
// the scalar dot products against dequantized values, and GGUF files holding every weight type,
// mixed per tensor, with unbuilt types refused by name.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "gguf/gguf.h"
#include "ops/quant_blocks.h"
#include "ops/quant_ref.h"
#include "support/quant_data.h"

namespace kamera {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string fixture(const std::string& leaf) {
  return std::string(KAMERA_SOURCE_DIR) + "/tests/data/quant/" + leaf;
}

TEST(QuantTraits, GeometryAndNamesMatchGgml) {
  struct Row {
    GgmlType t;
    const char* name;
    int block, bytes;
  };
  // ggml's type_traits (ggml.c): name, blck_size, type_size.
  const Row rows[] = {
      {GgmlType::F32, "f32", 1, 4},           {GgmlType::F16, "f16", 1, 2},
      {GgmlType::BF16, "bf16", 1, 2},         {GgmlType::Q4_0, "q4_0", 32, 18},
      {GgmlType::Q4_1, "q4_1", 32, 20},       {GgmlType::Q5_0, "q5_0", 32, 22},
      {GgmlType::Q5_1, "q5_1", 32, 24},       {GgmlType::Q8_0, "q8_0", 32, 34},
      {GgmlType::Q2_K, "q2_K", 256, 84},      {GgmlType::Q3_K, "q3_K", 256, 110},
      {GgmlType::Q4_K, "q4_K", 256, 144},     {GgmlType::Q5_K, "q5_K", 256, 176},
      {GgmlType::Q6_K, "q6_K", 256, 210},     {GgmlType::IQ4_NL, "iq4_nl", 32, 18},
      {GgmlType::IQ4_XS, "iq4_xs", 256, 136}, {GgmlType::MXFP4, "mxfp4", 32, 17},
  };
  EXPECT_EQ(weight_types().size(), std::size(rows));
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    EXPECT_TRUE(ggml_type_is_weight(uint32_t(r.t)));
    EXPECT_EQ(ggml_type_name(r.t), r.name);
    EXPECT_EQ(ggml_block_size(r.t), r.block);
    EXPECT_EQ(ggml_block_bytes(r.t), r.bytes);
    EXPECT_EQ(ggml_row_bytes(r.t, 4 * r.block), size_t(4 * r.bytes));
    if (r.block > 1) {
      EXPECT_FALSE(ggml_row_bytes(r.t, r.block + 1).has_value());
    }
  }
  for (uint32_t id : {9u, 15u, 16u, 17u, 18u, 19u, 21u, 22u, 24u, 29u, 34u, 35u})
    EXPECT_FALSE(ggml_type_is_weight(id)) << ggml_type_name(id);
  EXPECT_EQ(ggml_type_name(16), "iq2_xxs");
  EXPECT_EQ(ggml_type_name(35), "tq2_0");
  EXPECT_EQ(ggml_type_name(31).rfind("q4_0_4_4", 0), 0u);
  EXPECT_EQ(ggml_type_name(1000), "unknown");
}

// Every weight type's scalar dequantization equals gguf-py's, bit for bit.
TEST(QuantRef, DequantizeMatchesIndependentFixturesBitExact) {
  for (GgmlType t : weight_types()) {
    if (t == GgmlType::F32) continue;  // a copy
    std::string name = ggml_type_name(t);
    for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
    SCOPED_TRACE(name);
    const std::vector<uint8_t> blocks = read_file(fixture(name + ".blocks"));
    const std::vector<uint8_t> expect = read_file(fixture(name + ".f32"));
    ASSERT_FALSE(blocks.empty()) << "missing fixture " << fixture(name + ".blocks");
    const int64_t n = int64_t(expect.size() / 4);
    ASSERT_EQ(blocks.size(), *ggml_row_bytes(t, n));
    std::vector<float> got(static_cast<size_t>(n));
    quant::dequantize_row_ref(t, blocks.data(), got.data(), n);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; ++i) {
      float e;
      std::memcpy(&e, &expect[size_t(4 * i)], 4);
      ASSERT_EQ(std::bit_cast<uint32_t>(got[size_t(i)]), std::bit_cast<uint32_t>(e))
          << "value " << i << ": " << got[size_t(i)] << " vs " << e;
      nonzero += e != 0.0f;
    }
    EXPECT_GT(nonzero, n / 2);  // the fixture exercises real values
  }
}

// vec_dot_ref(w, q(x)) equals the double-precision dot of dequantized w with dequantized q(x).
TEST(QuantRef, DotEqualsDotOfDequantizedRows) {
  for (GgmlType t : weight_types()) {
    SCOPED_TRACE(ggml_type_name(t));
    const int64_t n = 1024;
    const auto w = quant_data::random_rows(t, 1, n, 5);
    const auto x = quant_data::random_activations(n, 6);
    std::vector<uint8_t> qa(quant::act_row_bytes(t, n));
    const GgmlType dt = quant::dot_type_of(t);
    quant::quantize_act_ref(dt, x.data(), qa.data(), n);
    std::vector<float> wf(static_cast<size_t>(n)), xf(static_cast<size_t>(n));
    quant::dequantize_row_ref(t, w.data(), wf.data(), n);
    if (dt == GgmlType::F32) {
      xf = x;
    } else if (dt == GgmlType::Q8_K) {
      const auto* b = reinterpret_cast<const quant::BlockQ8_K*>(qa.data());
      for (int64_t i = 0; i < n; ++i) xf[size_t(i)] = b[i / 256].d * float(b[i / 256].qs[i % 256]);
      for (int64_t g = 0; g < n / 16; ++g) {  // bsums are the sums of 16
        int s = 0;
        for (int j = 0; j < 16; ++j) s += b[g / 16].qs[16 * (g % 16) + j];
        ASSERT_EQ(s, b[g / 16].bsums[g % 16]);
      }
    } else {
      // q8_0 and q8_1 share the d-then-quants prefix; q8_1 has s after d
      const size_t bb = size_t(ggml_block_bytes(dt)), qoff = dt == GgmlType::Q8_1 ? 4 : 2;
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t* blk = qa.data() + size_t(i / 32) * bb;
        uint16_t d;
        std::memcpy(&d, blk, 2);
        xf[size_t(i)] = f16_to_f32(d) * float(int8_t(blk[qoff + size_t(i % 32)]));
      }
    }
    double ref = 0.0, mag = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      ref += double(wf[size_t(i)]) * double(xf[size_t(i)]);
      mag += std::fabs(double(wf[size_t(i)]) * double(xf[size_t(i)]));
    }
    const float got = quant::vec_dot_ref(t, n, w.data(), qa.data());
    // q8_1's s is an f16 (relative error 2^-11 of d * sum(q)); elsewhere float rounding only.
    EXPECT_NEAR(got, ref, 2e-3 * mag + 1e-6) << "mag " << mag;
    // quantizing the activations keeps the dot close to the unquantized one
    double exact = 0.0;
    for (int64_t i = 0; i < n; ++i) exact += double(wf[size_t(i)]) * double(x[size_t(i)]);
    EXPECT_NEAR(got, exact, 0.02 * mag + 1e-6);
  }
}

TEST(QuantRef, ActivationQuantizersRoundToTheNearestStep) {
  const auto x = quant_data::random_activations(512, 9);
  std::vector<quant::BlockQ8_K> k(2);
  quant::quantize_act_ref(GgmlType::Q8_K, x.data(), k.data(), 512);
  for (int i = 0; i < 512; ++i) {
    const quant::BlockQ8_K& b = k[size_t(i / 256)];
    EXPECT_LE(std::fabs(b.d * b.qs[i % 256] - x[size_t(i)]), 0.5001f * std::fabs(b.d)) << i;
  }
  std::vector<quant::BlockQ8_0> z(16);
  std::vector<float> zeros(512, 0.0f);
  quant::quantize_act_ref(GgmlType::Q8_0, zeros.data(), z.data(), 512);
  for (const auto& b : z) {
    EXPECT_EQ(f16_to_f32(b.d), 0.0f);
    for (int8_t q : b.qs) EXPECT_EQ(q, 0);
  }
}

// --- GGUF files of every type --------------------------------------------------------------------

// Raw GGUF v3 bytes: tensors described and laid out at 32-byte alignment.
struct RawTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type;
  std::vector<uint8_t> data;
};

std::vector<uint8_t> gguf_bytes(const std::vector<RawTensor>& ts) {
  std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
  auto put = [&](auto v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(v));
  };
  put(uint32_t(3));
  put(uint64_t(ts.size()));
  put(uint64_t(0));
  uint64_t offset = 0;
  for (const RawTensor& t : ts) {
    put(uint64_t(t.name.size()));
    b.insert(b.end(), t.name.begin(), t.name.end());
    put(uint32_t(t.ne.size()));
    for (uint64_t d : t.ne) put(d);
    put(t.type);
    put(offset);
    offset += (t.data.size() + 31) / 32 * 32;
  }
  for (const RawTensor& t : ts) {
    b.resize((b.size() + 31) / 32 * 32);
    b.insert(b.end(), t.data.begin(), t.data.end());
  }
  b.resize((b.size() + 31) / 32 * 32);
  return b;
}

// One file with a tensor of every weight type (as llama-quantize mixes them, including the
// q5_0 / q8_0 fallbacks for rows of 896): each parses with its raw type and mapped bytes, and
// read_f32 gives the reference dequantization.
TEST(QuantGguf, EveryWeightTypeParsesAndReads) {
  std::vector<RawTensor> ts;
  uint32_t seed = 1;
  for (GgmlType t : weight_types()) {
    const int64_t cols = ggml_block_size(t) == 256 ? 512 : 896, rows = 3;
    ts.push_back({"blk.0." + ggml_type_name(t) + ".weight",
                  {uint64_t(cols), uint64_t(rows)},
                  uint32_t(t),
                  quant_data::random_rows(t, rows, cols, seed++)});
  }
  const std::vector<uint8_t> bytes = gguf_bytes(ts);
  auto f = GgufFile::parse(bytes, "mixed.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_EQ((*f)->tensors().size(), ts.size());
  for (const RawTensor& r : ts) {
    SCOPED_TRACE(r.name);
    const GgufTensor* t = (*f)->find_tensor(r.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(uint32_t(t->type), r.type);
    EXPECT_EQ(t->nbytes, r.data.size());
    EXPECT_EQ(std::memcmp(t->data, r.data.data(), r.data.size()), 0);
    auto v = (*f)->read_f32(*t);
    ASSERT_TRUE(v.ok()) << v.message();
    std::vector<float> ref(v->size());
    quant::dequantize_row_ref(t->type, r.data.data(), ref.data(), int64_t(ref.size()));
    EXPECT_EQ(std::memcmp(v->data(), ref.data(), ref.size() * 4), 0);
  }
}

TEST(QuantGguf, UnbuiltTypesAreRefusedNamingTensorAndType) {
  const std::pair<uint32_t, const char*> refused[] = {
      {16, "iq2_xxs"}, {17, "iq2_xs"}, {18, "iq3_xxs"}, {19, "iq1_s"}, {21, "iq3_s"},
      {22, "iq2_s"},   {29, "iq1_m"},  {34, "tq1_0"},   {35, "tq2_0"}, {31, "q4_0_4_4"},
      {9, "q8_1"},     {15, "q8_K"},   {26, "i32"},
  };
  for (const auto& [id, name] : refused) {
    SCOPED_TRACE(name);
    const auto info = ggml_type_info(id);
    const size_t nb = info ? size_t(info->block_bytes) : 64;
    const auto bytes = gguf_bytes({{"blk.3.ffn_up.weight", {256}, id, std::vector<uint8_t>(nb)}});
    auto f = GgufFile::parse(bytes, "refused.gguf");
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.code(), ErrorCode::Unsupported);
    EXPECT_NE(f.message().find("'blk.3.ffn_up.weight'"), std::string::npos) << f.message();
    EXPECT_NE(f.message().find(name), std::string::npos) << f.message();
  }
}

TEST(QuantGguf, RowsThatAreNotWholeBlocksAreCorrupt) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    SCOPED_TRACE(ggml_type_name(t));
    const int bs = ggml_block_size(t);
    const auto bytes = gguf_bytes({{"w",
                                    {uint64_t(bs + bs / 2), 2},
                                    uint32_t(t),
                                    std::vector<uint8_t>(size_t(ggml_block_bytes(t)) * 3)}});
    auto f = GgufFile::parse(bytes, "rows.gguf");
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.code(), ErrorCode::CorruptData);
    EXPECT_NE(f.message().find("multiple of " + std::to_string(bs)), std::string::npos)
        << f.message();
  }
}

}  // namespace
}  // namespace kamera
