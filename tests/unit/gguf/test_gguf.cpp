// GGUF reader/writer: round trips of every metadata type and tensor dtype, offset alignment, and
// malformed inputs that must fail cleanly with a message naming the file.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "core/dtype.h"
#include "gguf/gguf.h"

// True when a temporary file of the writer ("<path>.tmp...") was left beside `path`.
static bool temp_left_beside(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string prefix = p.filename().string() + ".tmp";
  for (const auto& e : std::filesystem::directory_iterator(p.parent_path()))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

namespace kamera {
namespace {

namespace fs = std::filesystem;

// Raw little-endian GGUF bytes, for inputs the writer cannot (or must not) produce.
struct Raw {
  std::vector<uint8_t> b;

  template <class T>
  Raw& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Raw& str(std::string_view s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Raw& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    put<uint32_t>(version);
    put<uint64_t>(n_tensors);
    return put<uint64_t>(n_kv);
  }
  // Key and type id of a metadata entry; the value follows.
  Raw& key(std::string_view k, GgufType t) {
    str(k);
    return put<uint32_t>(uint32_t(t));
  }
  Raw& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t ggml_type,
              uint64_t offset) {
    str(name);
    put<uint32_t>(uint32_t(ne.size()));
    for (uint64_t d : ne) put<uint64_t>(d);
    put<uint32_t>(ggml_type);
    return put<uint64_t>(offset);
  }
  Raw& pad(size_t alignment = 32) {
    b.resize((b.size() + alignment - 1) / alignment * alignment);
    return *this;
  }
  Raw& zeros(size_t n) {
    b.resize(b.size() + n);
    return *this;
  }
};

Result<std::shared_ptr<const GgufFile>> parse(const std::vector<uint8_t>& bytes,
                                              const std::string& name = "bad.gguf") {
  return GgufFile::parse(std::span<const uint8_t>(bytes), name);
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Each test writes under its own temporary directory (tests may run in parallel processes).
class GgufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("kamera_gguf_" + std::to_string(::getpid()) + "_" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& leaf) const { return (dir_ / leaf).string(); }

  fs::path dir_;
};

TEST_F(GgufTest, DtypeMapping) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    EXPECT_EQ(dtype_from_ggml(ggml_type_of(t)), t);
  }
  EXPECT_EQ(ggml_type_of(DType::F32), 0u);
  EXPECT_EQ(ggml_type_of(DType::F16), 1u);
  EXPECT_EQ(ggml_type_of(DType::Q8_0), 8u);
  EXPECT_EQ(ggml_type_of(DType::BF16), 30u);
  EXPECT_FALSE(dtype_from_ggml(2).has_value());
  EXPECT_FALSE(dtype_from_ggml(12345).has_value());
}

TEST_F(GgufTest, WriterMetadataRoundTrip) {
  GgufWriter w;
  w.set_u32("a.u32", 4000000000u);
  w.set_i32("a.i32", -123456);
  w.set_u64("a.u64", uint64_t(1) << 62);
  w.set_f32("a.f32", 0.1f);
  w.set_bool("a.bool", true);
  w.set_bool("a.bool_false", false);
  w.set_string("a.string", std::string("h\0llo \xe2\x96\x81", 10));
  w.set_string("a.empty_string", "");
  w.set_string_array("a.strings", {"x", "", "longer string"});
  w.set_string_array("a.no_strings", {});
  w.set_f32_array("a.f32s", {1.5f, -0.0f, 1e-30f, std::numeric_limits<float>::infinity()});
  w.set_i32_array(
      "a.i32s", {-1, 0, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()});
  w.set_u32_array("a.u32s", {0, 7, std::numeric_limits<uint32_t>::max()});
  const std::string p = path("meta.gguf");
  ASSERT_TRUE(w.write(p).ok());
  EXPECT_FALSE(temp_left_beside(p));

  auto f = GgufFile::open(p);
  ASSERT_TRUE(f.ok()) << f.message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.name(), p);
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.metadata().size(), 13u);
  EXPECT_FALSE(g.has("general.alignment"));  // written only when set
  EXPECT_TRUE(g.tensors().empty());

  EXPECT_EQ(g.find("a.u32")->type, GgufType::U32);
  EXPECT_EQ(g.get_int("a.u32"), 4000000000);
  EXPECT_EQ(g.find("a.i32")->type, GgufType::I32);
  EXPECT_EQ(g.get_int("a.i32"), -123456);
  EXPECT_EQ(g.find("a.u64")->type, GgufType::U64);
  EXPECT_EQ(g.get_int("a.u64"), int64_t(1) << 62);
  EXPECT_EQ(g.find("a.f32")->type, GgufType::F32);
  EXPECT_EQ(g.get_float("a.f32"), double(0.1f));
  EXPECT_EQ(g.get_bool("a.bool"), true);
  EXPECT_EQ(g.get_bool("a.bool_false"), false);
  EXPECT_EQ(g.get_string("a.string"), std::string("h\0llo \xe2\x96\x81", 10));
  EXPECT_EQ(g.get_string("a.empty_string"), "");

  ASSERT_NE(g.get_string_array("a.strings"), nullptr);
  EXPECT_EQ(*g.get_string_array("a.strings"), (std::vector<std::string>{"x", "", "longer string"}));
  ASSERT_NE(g.get_string_array("a.no_strings"), nullptr);
  EXPECT_TRUE(g.get_string_array("a.no_strings")->empty());
  EXPECT_EQ(g.find("a.f32s")->array_type, GgufType::F32);
  const std::vector<double>* fs32 = g.get_float_array("a.f32s");
  ASSERT_NE(fs32, nullptr);
  ASSERT_EQ(fs32->size(), 4u);
  EXPECT_EQ((*fs32)[0], 1.5);
  EXPECT_TRUE((*fs32)[1] == 0.0 && std::signbit((*fs32)[1]));
  EXPECT_EQ((*fs32)[2], double(1e-30f));
  EXPECT_TRUE(std::isinf((*fs32)[3]));
  EXPECT_EQ(g.find("a.i32s")->array_type, GgufType::I32);
  EXPECT_EQ(*g.get_int_array("a.i32s"),
            (std::vector<int64_t>{-1, 0, std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(g.find("a.u32s")->array_type, GgufType::U32);
  EXPECT_EQ(*g.get_int_array("a.u32s"), (std::vector<int64_t>{0, 7, 4294967295}));

  // Accessors of the wrong kind answer "absent".
  EXPECT_FALSE(g.get_int("a.f32").has_value());
  EXPECT_FALSE(g.get_int("a.string").has_value());
  EXPECT_FALSE(g.get_bool("a.u32").has_value());
  EXPECT_FALSE(g.get_string("a.strings").has_value());
  EXPECT_EQ(g.get_float("a.i32"), -123456.0);  // integers widen to float
  EXPECT_EQ(g.get_int_array("a.f32s"), nullptr);
  EXPECT_EQ(g.get_float_array("a.strings"), nullptr);
  EXPECT_EQ(g.get_string_array("a.string"), nullptr);
  EXPECT_FALSE(g.get_int("missing").has_value());
  EXPECT_EQ(g.find("missing"), nullptr);
  EXPECT_FALSE(g.has("missing"));
}

// Every GGUF value type 0..12, as a scalar and as an array element, parsed from raw bytes (the
// writer only produces a subset of them).
TEST_F(GgufTest, ParsesEveryMetadataType) {
  Raw r;
  r.header(0, 26);
  r.key("u8", GgufType::U8).put<uint8_t>(250);
  r.key("i8", GgufType::I8).put<int8_t>(-100);
  r.key("u16", GgufType::U16).put<uint16_t>(65000);
  r.key("i16", GgufType::I16).put<int16_t>(-32000);
  r.key("u32", GgufType::U32).put<uint32_t>(4294967295u);
  r.key("i32", GgufType::I32).put<int32_t>(-2147483647 - 1);
  r.key("f32", GgufType::F32).put<float>(-2.5f);
  r.key("bool", GgufType::BOOL).put<uint8_t>(1);
  r.key("string", GgufType::STRING).str("text");
  r.key("u64", GgufType::U64).put<uint64_t>(uint64_t(std::numeric_limits<int64_t>::max()));
  r.key("i64", GgufType::I64).put<int64_t>(std::numeric_limits<int64_t>::min());
  r.key("f64", GgufType::F64).put<double>(1e300);
  auto array = [&](const char* k, GgufType et, uint64_t n) {
    r.key(k, GgufType::ARRAY).put<uint32_t>(uint32_t(et)).put<uint64_t>(n);
  };
  array("a.u8", GgufType::U8, 2);
  r.put<uint8_t>(0).put<uint8_t>(255);
  array("a.i8", GgufType::I8, 2);
  r.put<int8_t>(-128).put<int8_t>(127);
  array("a.u16", GgufType::U16, 1);
  r.put<uint16_t>(65535);
  array("a.i16", GgufType::I16, 1);
  r.put<int16_t>(-32768);
  array("a.u32", GgufType::U32, 1);
  r.put<uint32_t>(123);
  array("a.i32", GgufType::I32, 2);
  r.put<int32_t>(-5).put<int32_t>(5);
  array("a.f32", GgufType::F32, 2);
  r.put<float>(0.25f).put<float>(-1.0f);
  array("a.bool", GgufType::BOOL, 3);
  r.put<uint8_t>(1).put<uint8_t>(0).put<uint8_t>(1);
  array("a.string", GgufType::STRING, 2);
  r.str("p").str("");
  array("a.u64", GgufType::U64, 1);
  r.put<uint64_t>(1ull << 40);
  array("a.i64", GgufType::I64, 1);
  r.put<int64_t>(-(1ll << 40));
  array("a.f64", GgufType::F64, 2);
  r.put<double>(0.1).put<double>(-0.0);
  array("a.empty", GgufType::F64, 0);
  array("a.empty_strings", GgufType::STRING, 0);
  auto f = parse(r.b, "types.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.metadata().size(), 26u);

  EXPECT_EQ(g.get_int("u8"), 250);
  EXPECT_EQ(g.get_int("i8"), -100);
  EXPECT_EQ(g.get_int("u16"), 65000);
  EXPECT_EQ(g.get_int("i16"), -32000);
  EXPECT_EQ(g.get_int("u32"), 4294967295);
  EXPECT_EQ(g.get_int("i32"), -2147483648ll);
  EXPECT_EQ(g.get_float("f32"), -2.5);
  EXPECT_EQ(g.get_bool("bool"), true);
  EXPECT_EQ(g.get_string("string"), "text");
  EXPECT_EQ(g.get_int("u64"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(g.get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(g.get_float("f64"), 1e300);
  const std::pair<const char*, GgufType> types[] = {
      {"u8", GgufType::U8},     {"i8", GgufType::I8},     {"u16", GgufType::U16},
      {"i16", GgufType::I16},   {"u32", GgufType::U32},   {"i32", GgufType::I32},
      {"f32", GgufType::F32},   {"bool", GgufType::BOOL}, {"string", GgufType::STRING},
      {"u64", GgufType::U64},   {"i64", GgufType::I64},   {"f64", GgufType::F64},
      {"a.u8", GgufType::ARRAY}};
  for (const auto& [k, t] : types) EXPECT_EQ(g.find(k)->type, t) << k;

  EXPECT_EQ(*g.get_int_array("a.u8"), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(*g.get_int_array("a.i8"), (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(*g.get_int_array("a.u16"), (std::vector<int64_t>{65535}));
  EXPECT_EQ(*g.get_int_array("a.i16"), (std::vector<int64_t>{-32768}));
  EXPECT_EQ(*g.get_int_array("a.u32"), (std::vector<int64_t>{123}));
  EXPECT_EQ(*g.get_int_array("a.i32"), (std::vector<int64_t>{-5, 5}));
  EXPECT_EQ(*g.get_float_array("a.f32"), (std::vector<double>{0.25, -1.0}));
  EXPECT_EQ(g.find("a.bool")->array_type, GgufType::BOOL);
  EXPECT_EQ(std::get<std::vector<int64_t>>(g.find("a.bool")->data),
            (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(*g.get_string_array("a.string"), (std::vector<std::string>{"p", ""}));
  EXPECT_EQ(*g.get_int_array("a.u64"), (std::vector<int64_t>{1ll << 40}));
  EXPECT_EQ(*g.get_int_array("a.i64"), (std::vector<int64_t>{-(1ll << 40)}));
  EXPECT_EQ(*g.get_float_array("a.f64"), (std::vector<double>{0.1, -0.0}));
  ASSERT_NE(g.get_float_array("a.empty"), nullptr);
  EXPECT_TRUE(g.get_float_array("a.empty")->empty());
  ASSERT_NE(g.get_string_array("a.empty_strings"), nullptr);
  EXPECT_TRUE(g.get_string_array("a.empty_strings")->empty());
}

TEST_F(GgufTest, AcceptsVersion2) {
  Raw r;
  r.header(0, 1, /*version=*/2).key("k", GgufType::U32).put<uint32_t>(9);
  auto f = parse(r.b, "v2.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->version(), 2u);
  EXPECT_EQ((*f)->get_int("k"), 9);
}

// Values spanning f16/bf16 normal, subnormal and overflow ranges, plus special values.
std::vector<float> test_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-30, 20);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = std::ldexp(normal(rng), exp(rng));
  const float specials[] = {0.0f,  -0.0f,    1.0f,
                            -1.0f, 65504.0f, 70000.0f,
                            1e-8f, -3e-5f,   std::numeric_limits<float>::infinity(),
                            1e38f, 5.96e-8f};
  for (size_t i = 0; i < std::size(specials) && i * 3 < v.size(); ++i) v[i * 3] = specials[i];
  return v;
}

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

TEST_F(GgufTest, TensorRoundTripAllDtypes) {
  struct Case {
    const char* name;
    std::vector<int64_t> ne;
    DType type;
  };
  const std::vector<Case> cases = {
      {"t.f32", {7, 3}, DType::F32},
      {"t.f32_4d", {2, 3, 2, 2}, DType::F32},
      {"t.f16", {33}, DType::F16},
      {"t.bf16", {5, 2, 3}, DType::BF16},
      {"t.q8", {64, 5}, DType::Q8_0},
      {"t.q8_1d", {32}, DType::Q8_0},
      {"t.f16_odd", {1, 1, 1, 3}, DType::F16},
  };
  GgufWriter w;
  w.set_string("general.architecture", "test");
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i < cases.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : cases[i].ne) n *= d;
    inputs.push_back(test_values(n, uint32_t(100 + i)));
    if (cases[i].type == DType::Q8_0) {
      // Q8_0 of huge values would overflow the f16 scale; keep it in a sane range and make one
      // block all zero.
      for (auto& x : inputs.back()) x = std::isfinite(x) ? std::clamp(x, -1e4f, 1e4f) : 1.0f;
      if (n >= 64) std::fill(inputs.back().begin() + 32, inputs.back().begin() + 64, 0.0f);
    }
    w.add_tensor(cases[i].name, cases[i].ne, cases[i].type,
                 [src = inputs.back()](float* dst) { std::copy(src.begin(), src.end(), dst); });
  }
  const std::string p = path("tensors.gguf");
  const Status st = w.write(p);
  ASSERT_TRUE(st.ok()) << st.message();

  auto f = GgufFile::open(p);
  ASSERT_TRUE(f.ok()) << f.message();
  const GgufFile& g = **f;
  ASSERT_EQ(g.tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.name);
    const GgufTensor& t = g.tensors()[i];  // file order == add order
    EXPECT_EQ(t.name, c.name);
    EXPECT_EQ(g.find_tensor(c.name), &t);
    EXPECT_EQ(t.ne, c.ne);
    EXPECT_EQ(t.type, ggml_type_from_dtype(c.type));
    const int64_t n = t.n_elements();
    ASSERT_EQ(size_t(n), inputs[i].size());
    EXPECT_EQ(t.nbytes, dtype_row_bytes(c.type, c.ne[0]) * size_t(n / c.ne[0]));
    auto out = g.read_f32(t);
    ASSERT_TRUE(out.ok()) << out.message();
    ASSERT_EQ(out->size(), inputs[i].size());
    const std::vector<float>& x = inputs[i];
    const std::vector<float>& y = *out;
    for (int64_t j = 0; j < n; ++j) {
      switch (c.type) {
        case DType::F32:
          ASSERT_EQ(bits(y[j]), bits(x[j])) << j;
          break;
        case DType::F16:
          ASSERT_EQ(bits(y[j]), bits(f16_to_f32(f32_to_f16(x[j])))) << j << " x=" << x[j];
          break;
        case DType::BF16:
          ASSERT_EQ(bits(y[j]), bits(bf16_to_f32(f32_to_bf16(x[j])))) << j << " x=" << x[j];
          break;
        case DType::Q8_0: {
          // Block scale d = amax/127, stored as f16 (d16). Rounding to the nearest quant is off
          // by at most d/2; using d16 instead of d adds at most 127 |d - d16|.
          const int64_t b0 = j / 32 * 32;
          float amax = 0.0f;
          for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(x[b0 + k]));
          const double d = amax / 127.0;
          const double d16 = f16_to_f32(f32_to_f16(float(d)));
          const double tol = d / 2 + 127 * std::fabs(d - d16) + 1e-6 * d;
          ASSERT_LE(std::fabs(double(y[j]) - x[j]), tol) << j << " x=" << x[j];
          if (amax == 0.0f) {
            ASSERT_EQ(y[j], 0.0f);
          }
          break;
        }
      }
    }
  }
}

TEST_F(GgufTest, OffsetsAreAligned) {
  for (uint32_t alignment : {0u, 64u, 8u}) {  // 0: not set, default 32
    SCOPED_TRACE(alignment);
    GgufWriter w;
    w.set_string("general.name", "x");  // header length not a multiple of anything
    if (alignment) w.set_u32("general.alignment", alignment);
    w.add_tensor("a", {3}, DType::F16, [](float* d) { d[0] = d[1] = d[2] = 1.0f; });  // 6 bytes
    w.add_tensor("b", {5}, DType::F32, [](float* d) { std::fill(d, d + 5, 2.0f); });  // 20 bytes
    w.add_tensor("c", {32, 3}, DType::Q8_0, [](float* d) { std::fill(d, d + 96, 3.0f); });
    w.add_tensor("d", {1}, DType::BF16, [](float* d) { d[0] = 4.0f; });
    const std::string p = path("aligned.gguf");
    ASSERT_TRUE(w.write(p).ok());
    const std::vector<uint8_t> bytes = read_bytes(p);
    auto f = parse(bytes, p);
    ASSERT_TRUE(f.ok()) << f.message();
    const GgufFile& g = **f;
    const uint64_t a = alignment ? alignment : 32;
    EXPECT_EQ(g.has("general.alignment"), alignment != 0);
    uint64_t expected_offset = 0;
    for (const GgufTensor& t : g.tensors()) {
      SCOPED_TRACE(t.name);
      EXPECT_EQ(t.offset % a, 0u);
      EXPECT_EQ(size_t(t.data - bytes.data()) % a, 0u);
      EXPECT_EQ(t.offset, expected_offset);  // packed: each tensor padded to the alignment
      expected_offset += (t.nbytes + a - 1) / a * a;
      auto v = g.read_f32(t);
      ASSERT_TRUE(v.ok());
      for (float x : *v) EXPECT_NEAR(x, float(t.name[0] - 'a' + 1), 1e-3);  // q8_0 scale is f16
    }
    // The data section starts at the first aligned byte after the header, and the file ends at
    // the padded end of the last tensor.
    EXPECT_EQ(bytes.size(), size_t(g.tensors()[0].data - bytes.data()) + expected_offset);
  }
}

TEST_F(GgufTest, SettingAKeyAgainReplacesItInPlace) {
  GgufWriter w;
  w.set_u32("zzz.first", 1);
  w.set_u32("aaa.second", 2);
  w.set_string("zzz.first", "replaced");
  const std::string p = path("order.gguf");
  ASSERT_TRUE(w.write(p).ok());
  const std::vector<uint8_t> bytes = read_bytes(p);
  const std::string s(bytes.begin(), bytes.end());
  const size_t first = s.find("zzz.first"), second = s.find("aaa.second");
  ASSERT_NE(first, std::string::npos);
  ASSERT_NE(second, std::string::npos);
  EXPECT_LT(first, second);                                      // insertion order kept
  EXPECT_EQ(s.find("zzz.first", first + 1), std::string::npos);  // written once
  auto f = GgufFile::open(p);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->metadata().size(), 2u);
  EXPECT_EQ((*f)->get_string("zzz.first"), "replaced");
}

TEST_F(GgufTest, WriterRejectsBadInputsBeforeWriting) {
  struct Case {
    const char* what;
    std::function<void(GgufWriter&)> setup;
    const char* expect;
  };
  auto fill = [](float*) {};
  const std::vector<Case> cases = {
      {"q8_0 ne0=33",
       [&](GgufWriter& w) {
         w.add_tensor("t", {33, 2}, DType::Q8_0, fill);
       },
       "multiple of 32"},
      {"mxfp4 ne0=48",
       [&](GgufWriter& w) {
         w.add_tensor("t", {48, 2}, GgmlType::MXFP4, fill);
       },
       "mxfp4 rows must be a multiple of 32"},
      {"q4_0 (not encoded)",
       [&](GgufWriter& w) {
         w.add_tensor("t", {32, 2}, GgmlType::Q4_0, fill);
       },
       "encodes f32, f16, bf16, q8_0 and mxfp4, not q4_0"},
      {"0 dims", [&](GgufWriter& w) { w.add_tensor("t", {}, DType::F32, fill); }, "1 to 4"},
      {"5 dims",
       [&](GgufWriter& w) {
         w.add_tensor("t", {1, 1, 1, 1, 1}, DType::F32, fill);
       },
       "1 to 4"},
      {"ne 0",
       [&](GgufWriter& w) {
         w.add_tensor("t", {4, 0}, DType::F32, fill);
       },
       "bad shape"},
      {"negative ne", [&](GgufWriter& w) { w.add_tensor("t", {-4}, DType::F32, fill); },
       "bad shape"},
      {"overflow",
       [&](GgufWriter& w) {
         w.add_tensor("t", {1ll << 40, 1ll << 40}, DType::F32, fill);
       },
       "bad shape"},
      {"duplicate",
       [&](GgufWriter& w) {
         w.add_tensor("t", {4}, DType::F32, fill);
         w.add_tensor("t", {4}, DType::F32, fill);
       },
       "duplicate tensor name"},
      {"long name",
       [&](GgufWriter& w) { w.add_tensor(std::string(64, 'n'), {4}, DType::F32, fill); },
       "name must be"},
      {"no fill", [&](GgufWriter& w) { w.add_tensor("t", {4}, DType::F32, nullptr); }, "fill"},
      {"u64 too big", [&](GgufWriter& w) { w.set_u64("k", ~uint64_t(0)); }, "INT64_MAX"},
      {"alignment", [&](GgufWriter& w) { w.set_u32("general.alignment", 48); }, "power of two"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    GgufWriter w;
    w.set_u32("before", 1);
    c.setup(w);
    const std::string p = path("bad_shape.gguf");
    const Status st = w.write(p);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message().rfind(p + ": ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << st.message();
    EXPECT_FALSE(fs::exists(p));
    EXPECT_FALSE(temp_left_beside(p));
  }
}

TEST_F(GgufTest, WriterReportsIoErrorsWithThePath) {
  GgufWriter w;
  w.add_tensor("t", {4}, DType::F32, [](float* d) { std::fill(d, d + 4, 1.0f); });
  const std::string p = path("no/such/dir/x.gguf");
  const Status st = w.write(p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(p), std::string::npos) << st.message();
}

TEST_F(GgufTest, WriterTurnsAThrowingFillIntoAnError) {
  GgufWriter w;
  w.add_tensor("t", {4}, DType::F32, [](float*) { throw std::runtime_error("fill failed"); });
  const std::string p = path("throws.gguf");
  const Status st = w.write(p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind(p + ": ", 0), 0u) << st.message();
  EXPECT_NE(st.message().find("fill failed"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(temp_left_beside(p));
}

TEST_F(GgufTest, OpenReportsMissingAndEmptyFiles) {
  const std::string missing = path("missing.gguf");
  auto f = GgufFile::open(missing);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.message().rfind(missing + ": ", 0), 0u) << f.message();

  const std::string empty = path("empty.gguf");
  std::ofstream(empty).close();
  f = GgufFile::open(empty);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.message().rfind(empty + ": ", 0), 0u) << f.message();
  EXPECT_NE(f.message().find("empty"), std::string::npos) << f.message();

  f = GgufFile::open(dir_.string());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find(dir_.string()), std::string::npos) << f.message();
}

TEST_F(GgufTest, ReadF32RejectsTensorsOfAnotherFile) {
  GgufWriter w;
  w.add_tensor("t", {4}, DType::F32, [](float* d) { std::fill(d, d + 4, 1.0f); });
  const std::string p = path("one.gguf");
  ASSERT_TRUE(w.write(p).ok());
  auto a = GgufFile::open(p);
  auto b = GgufFile::open(p);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE((*a)->read_f32((*a)->tensors()[0]).ok());
  const GgufTensor copy = (*a)->tensors()[0];
  EXPECT_TRUE((*a)->read_f32(copy).ok());       // an equal copy is fine
  auto r = (*a)->read_f32((*b)->tensors()[0]);  // same name, other mapping
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message().rfind(p + ": ", 0), 0u) << r.message();
  GgufTensor fake;
  fake.name = "nope";
  EXPECT_FALSE((*a)->read_f32(fake).ok());
}

// A small valid file built by hand: one metadata entry, one f32 tensor of 4 values at offset 0.
// Tests below corrupt one field at a time.
struct Malformed {
  const char* what;
  std::vector<uint8_t> bytes;
  const char* expect;  // substring of the message
};

std::vector<Malformed> malformed_inputs() {
  std::vector<Malformed> m;
  auto one_tensor = [](std::vector<uint64_t> ne, uint32_t type, uint64_t offset, size_t data_bytes,
                       std::string_view name = "w") {
    Raw r;
    r.header(1, 0).tensor(name, std::move(ne), type, offset).pad().zeros(data_bytes);
    return r.b;
  };
  m.push_back({"empty file", {}, "empty"});
  m.push_back({"3 bytes", {'G', 'G', 'U'}, "too small"});
  {
    Raw r;
    r.header(0, 0);
    r.b[3] = 'X';
    m.push_back({"wrong magic", r.b, "not a GGUF file"});
  }
  m.push_back({"version 1", Raw().header(0, 0, 1).b, "unsupported GGUF version 1"});
  m.push_back({"version 4", Raw().header(0, 0, 4).b, "unsupported GGUF version 4"});
  m.push_back(
      {"header only, no counts", Raw().put<uint32_t>(0x46554747).put<uint32_t>(3).b, "truncated"});
  m.push_back({"huge n_kv", Raw().header(0, uint64_t(1) << 60).b, "metadata entries"});
  m.push_back({"max n_kv", Raw().header(0, ~uint64_t(0)).zeros(64).b, "metadata entries"});
  m.push_back({"huge n_tensors", Raw().header(uint64_t(1) << 62, 0).zeros(64).b, "tensors"});
  {
    Raw r;
    r.header(0, 1).put<uint64_t>(uint64_t(1) << 63).zeros(16);
    m.push_back({"huge key length", r.b, "length"});
  }
  {
    Raw r;
    r.header(0, 1).key("k", GgufType::STRING).put<uint64_t>(~uint64_t(0) - 7).zeros(16);
    m.push_back({"huge string length", r.b, "length"});
  }
  {
    Raw r;
    r.header(0, 1).key("k", GgufType::ARRAY).put<uint32_t>(uint32_t(GgufType::U32));
    r.put<uint64_t>(uint64_t(1) << 61).zeros(64);
    m.push_back({"huge array length", r.b, "array of"});
  }
  {
    Raw r;
    r.header(0, 1).key("k", GgufType::ARRAY).put<uint32_t>(uint32_t(GgufType::STRING));
    r.put<uint64_t>(~uint64_t(0)).zeros(64);
    m.push_back({"huge string array length", r.b, "array of"});
  }
  {
    Raw r;
    r.header(0, 1).key("k", GgufType::ARRAY).put<uint32_t>(uint32_t(GgufType::U8));
    r.put<uint64_t>(5).zeros(4);
    m.push_back({"array one byte short", r.b, "array of 5"});
  }
  {
    Raw r;
    r.header(0, 1).str("k").put<uint32_t>(13).zeros(16);
    m.push_back({"bad type id", r.b, "unknown value type 13"});
  }
  {
    Raw r;
    r.header(0, 1).str("k").put<uint32_t>(0xffffffffu).zeros(16);
    m.push_back({"type id 2^32-1", r.b, "unknown value type 4294967295"});
  }
  {
    Raw r;
    r.header(0, 1).key("k", GgufType::ARRAY).put<uint32_t>(99).put<uint64_t>(0);
    m.push_back({"bad array element type", r.b, "unknown array element type 99"});
  }
  {
    Raw r;
    r.header(0, 1).key("k", GgufType::ARRAY).put<uint32_t>(uint32_t(GgufType::ARRAY));
    r.put<uint64_t>(1).put<uint32_t>(uint32_t(GgufType::U8)).put<uint64_t>(0);
    m.push_back({"array of arrays", r.b, "array of arrays"});
  }
  {
    Raw r;
    r.header(0, 2).key("k", GgufType::U8).put<uint8_t>(1).key("k", GgufType::U8).put<uint8_t>(2);
    m.push_back({"duplicate key", r.b, "duplicate key"});
  }
  {
    Raw r;
    r.header(0, 1).key("k", GgufType::U64).put<uint64_t>(uint64_t(1) << 63);
    m.push_back({"u64 above INT64_MAX", r.b, "INT64_MAX"});
  }
  {
    Raw r;
    r.header(0, 1).key("k", GgufType::ARRAY).put<uint32_t>(uint32_t(GgufType::U64));
    r.put<uint64_t>(1).put<uint64_t>(~uint64_t(0));
    m.push_back({"u64 array element above INT64_MAX", r.b, "INT64_MAX"});
  }
  {
    Raw r;
    r.header(0, 1).key("k", GgufType::BOOL).put<uint8_t>(2);
    m.push_back({"bool 2", r.b, "bool value 2"});
  }
  {
    Raw r;
    r.header(0, 1).key("general.alignment", GgufType::U32).put<uint32_t>(48);
    m.push_back({"alignment 48", r.b, "power of two"});
  }
  {
    Raw r;
    r.header(0, 1).key("general.alignment", GgufType::U32).put<uint32_t>(0);
    m.push_back({"alignment 0", r.b, "power of two"});
  }
  {
    Raw r;
    r.header(0, 1).key("general.alignment", GgufType::U64).put<uint64_t>(32);
    m.push_back({"alignment u64", r.b, "expected u32"});
  }
  {
    Raw r;
    r.header(1, 0).str("w").put<uint32_t>(0).put<uint32_t>(0).put<uint64_t>(0).pad().zeros(16);
    m.push_back({"n_dims 0", r.b, "n_dims is 0"});
  }
  m.push_back({"n_dims 5", one_tensor({1, 1, 1, 1, 1}, 0, 0, 4), "n_dims is 5"});
  m.push_back({"ne 0", one_tensor({4, 0}, 0, 0, 16), "ne[1] is 0"});
  m.push_back({"ne above INT64_MAX", one_tensor({~uint64_t(0)}, 0, 0, 16), "INT64_MAX"});
  m.push_back({"ne product overflows", one_tensor({1ull << 32, 1ull << 32}, 0, 0, 16),
               "more than INT64_MAX elements"});
  m.push_back(
      {"tensor larger than file", one_tensor({1ull << 40}, 0, 0, 16), "more than the file size"});
  m.push_back({"unaligned offset", one_tensor({4}, 0, 4, 32), "not a multiple of the alignment"});
  m.push_back({"data past end", one_tensor({4}, 0, 0, 15), "runs past end of file"});
  m.push_back({"offset past end", one_tensor({4}, 0, 32, 32), "runs past end of file"});
  m.push_back({"offset near 2^64", one_tensor({4}, 0, ~uint64_t(31), 32), "runs past end of file"});
  {
    Raw r;
    r.header(2, 0).tensor("w", {4}, 0, 0).tensor("w", {4}, 0, 32).pad().zeros(64);
    m.push_back({"duplicate tensor name", r.b, "'w': duplicate tensor name"});
  }
  m.push_back({"q8_0 ne0 33", one_tensor({33, 2}, kGgmlTypeQ8_0, 0, 34 * 3), "multiple of 32"});
  m.push_back({"q4_K ne0 896", one_tensor({896, 2}, 12, 0, 144 * 7), "multiple of 256"});
  m.push_back({"iq2_xxs tensor", one_tensor({256}, 16, 0, 66, "blk.0.attn_q.weight"),
               "'blk.0.attn_q.weight': ggml type 16 (iq2_xxs) is not supported"});
  m.push_back({"type 1000", one_tensor({32}, 1000, 0, 128), "ggml type 1000 (unknown)"});
  {
    Raw r;
    r.header(1, 0).tensor("w", {4}, 0, 0);  // data section missing entirely
    m.push_back({"no data section", r.b, "runs past end of file"});
  }
  return m;
}

TEST_F(GgufTest, MalformedInputsFailWithMessages) {
  for (const Malformed& c : malformed_inputs()) {
    SCOPED_TRACE(c.what);
    auto f = parse(c.bytes, "bad.gguf");
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.message().rfind("bad.gguf: ", 0), 0u) << f.message();
    EXPECT_NE(f.message().find(c.expect), std::string::npos) << f.message();
  }
}

TEST_F(GgufTest, MalformedInputsFailFromDiskToo) {
  for (const Malformed& c : malformed_inputs()) {
    SCOPED_TRACE(c.what);
    const std::string p = path("bad.gguf");
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(c.bytes.data()), std::streamsize(c.bytes.size()));
    auto f = GgufFile::open(p);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.message().rfind(p + ": ", 0), 0u) << f.message();
    EXPECT_NE(f.message().find(c.expect), std::string::npos) << f.message();
  }
}

// The sanity of the table above: the unmodified file parses.
TEST_F(GgufTest, MalformedTableBaseIsValid) {
  Raw r;
  r.header(1, 1).key("general.alignment", GgufType::U32).put<uint32_t>(32);
  r.tensor("w", {4}, 0, 0).pad().put<float>(1).put<float>(2).put<float>(3).put<float>(4);
  auto f = parse(r.b, "good.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  auto v = (*f)->read_f32((*f)->tensors()[0]);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(GgufTest, TruncatedAtEveryByteFails) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  w.set_f32("llama.eps", 1e-5f);
  w.set_bool("b", true);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
  w.set_f32_array("tokenizer.ggml.scores", {0, -1, -2});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 1, 1});
  w.add_tensor("q", {32}, DType::Q8_0, [](float* d) { std::iota(d, d + 32, -16.0f); });
  w.add_tensor("h", {3}, DType::F16, [](float* d) { std::iota(d, d + 3, 1.0f); });
  w.add_tensor("f", {8}, DType::F32, [](float* d) { std::iota(d, d + 8, 1.0f); });  // 32 bytes
  const std::string p = path("small.gguf");
  ASSERT_TRUE(w.write(p).ok());
  const std::vector<uint8_t> bytes = read_bytes(p);
  auto full = parse(bytes, "small.gguf");
  ASSERT_TRUE(full.ok()) << full.message();
  // The last tensor ends exactly at the end of the file, so every shorter prefix is invalid.
  const GgufTensor& last = (*full)->tensors().back();
  ASSERT_EQ(size_t(last.data - bytes.data()) + last.nbytes, bytes.size());
  for (size_t len = 0; len < bytes.size(); ++len) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + ptrdiff_t(len));
    auto f = parse(prefix, "small.gguf");
    ASSERT_FALSE(f.ok()) << "prefix of " << len << " bytes parsed";
    ASSERT_EQ(f.message().rfind("small.gguf: ", 0), 0u) << f.message();
  }
}

}  // namespace
}  // namespace kamera

// Writing "over" a device or a directory is refused before anything is created beside it.
TEST(GgufWriterSafety, RefusesToReplaceNonRegularFiles) {
  kamera::GgufWriter w;
  w.set_u32("x", 1);
  auto st = w.write("/dev/null");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a regular file"), std::string::npos) << st.message();
  struct stat s {};
  ASSERT_EQ(stat("/dev/null", &s), 0);
  EXPECT_TRUE(S_ISCHR(s.st_mode));
  EXPECT_FALSE(w.write(testing::TempDir()).ok());  // a directory
}
