// Every weight type x every kernel path compiled in and supported by this CPU, against the scalar
// references (in the style of llama.cpp's test-backend-ops): dequantization, the decode dot
// products, and matmul at shapes that hit every edge (n = 1, odd n, rows not a multiple of the
// tile or panel), each with an NMSE bound per type and path.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"
#include "ops/quant_kernels.h"
#include "ops/quant_ref.h"
#include "ops/quant_repack.h"
#include "support/quant_data.h"
#include "support/quant_paths.h"

namespace kamera::quant {
namespace {

std::vector<const QuantKernels*> supported_paths() {
  return supported_quant_paths();
}

int64_t test_cols(GgmlType t) {
  return ggml_block_size(t) == 256 ? 512 : 160;
}

// NMSE bounds: a path's dequantization and dot products differ from the references by float
// rounding only (FMA, summation order).
constexpr double kDequantNmse = 1e-12;
constexpr double kDotNmse = 1e-10;

TEST(QuantKernels, PathsAreListedAndTheDispatchedOnesAreSupported) {
  const auto paths = supported_paths();
  ASSERT_FALSE(paths.empty());
  EXPECT_STREQ(paths[0]->name, "scalar");
  EXPECT_TRUE(cpu_supports(decode_kernels()));
  EXPECT_TRUE(cpu_supports(prefill_kernels()));
  EXPECT_LE(decode_kernels().level, isa_level());
  EXPECT_LE(prefill_kernels().level, isa_level());
  // On an AVX2 host at least the avx2 path is tested (and dispatched unless KAMERA_ISA caps it).
  if (cpu_isa_level() >= IsaLevel::Avx2) {
    EXPECT_GE(paths.size(), 2u);
  }
  for (GgmlType t : weight_types()) {
    const std::string s = kernel_path(t);
    EXPECT_NE(s.find(decode_kernels(t).name), std::string::npos) << s;
    EXPECT_NE(s.find(prefill_kernels(t).name), std::string::npos) << s;
    EXPECT_TRUE(cpu_supports(prefill_kernels(t)));
    EXPECT_TRUE(cpu_supports(decode_kernels(t)));
    // Only BF16 weights leave the default decode table, for vdpbf16ps rows, on CPUs with
    // AVX512-BF16 (unless KAMERA_DECODE_BF16=0).
    const char* dot_off = std::getenv("KAMERA_DECODE_BF16");
    const bool bf16_dots = cpu_features().avx512_bf16 && isa_level() >= IsaLevel::Avx512Vnni &&
                           (dot_off == nullptr || std::string(dot_off) != "0");
    if (t == GgmlType::BF16 && bf16_dots) {
      EXPECT_NE(decode_kernels(t).acts_to_bf16, nullptr) << s;
      EXPECT_NE(s.find("bf16-dot"), std::string::npos) << s;
    } else {
      EXPECT_EQ(&decode_kernels(t), &decode_kernels()) << s;
    }
    // Only BF16 weights leave the default table, for bf16 tiles, on CPUs with AVX512-BF16.
    const char* off = std::getenv("KAMERA_PREFILL_BF16");
    const bool bf16_tiles = cpu_features().avx512_bf16 && isa_level() >= IsaLevel::Avx512Vnni &&
                            (off == nullptr || std::string(off) != "0");
    if (t == GgmlType::BF16 && bf16_tiles) {
      EXPECT_EQ(prefill_kernels(t).panel, PanelFormat::BF16) << s;
    } else {
      EXPECT_EQ(&prefill_kernels(t), &prefill_kernels()) << s;
    }
  }
}

// KAMERA_ISA caps the dispatch (checked in a fresh process: the level is read once).
TEST(QuantKernels, KameraIsaCapsTheDispatchedPaths) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* names[] = {"scalar", "avx2", "avx512", "avx512_vnni"};
  for (int l = 0; l <= int(cpu_isa_level()) && l < 4; ++l) {
    SCOPED_TRACE(names[l]);
    EXPECT_EXIT(
        {
          setenv("KAMERA_ISA", names[l], 1);
          const bool ok = std::string(decode_kernels().name) == names[l] &&
                          std::string(prefill_kernels().name) == names[l] &&
                          kernel_path(GgmlType::Q8_0).find(names[l]) != std::string::npos;
          std::fprintf(stderr, "decode %s prefill %s\n", decode_kernels().name,
                       prefill_kernels().name);
          std::exit(ok ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "decode");
  }
  // KAMERA_ISA=avx2_vnni: the avx2 level through the AVX-VNNI table, where the CPU has it.
  if (!cpu_supports(avx2_vnni_kernels())) return;
  EXPECT_EXIT(
      {
        setenv("KAMERA_ISA", "avx2_vnni", 1);
        const bool ok = std::string(decode_kernels().name) == "avx2_vnni" &&
                        std::string(prefill_kernels().name) == "avx2_vnni" &&
                        kernel_path(GgmlType::Q4_K).find("avx-vnni") != std::string::npos;
        std::fprintf(stderr, "decode %s prefill %s\n", decode_kernels().name,
                     prefill_kernels().name);
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "decode");
}

TEST(QuantKernels, DequantizeMatchesReferenceOnEveryPath) {
  for (const QuantKernels* k : supported_paths()) {
    for (GgmlType t : weight_types()) {
      SCOPED_TRACE(std::string(k->name) + " " + ggml_type_name(t));
      const int64_t cols =
          ggml_block_size(t) == 256 ? 768 : 224 + (ggml_block_size(t) == 1 ? 5 : 0);
      const auto w = quant_data::random_rows(t, 1, cols, 11);
      std::vector<float> ref(static_cast<size_t>(cols)), got(static_cast<size_t>(cols), -1.0f);
      dequantize_row_ref(t, w.data(), ref.data(), cols);
      k->dequantize(t, w.data(), got.data(), cols);
      EXPECT_LE(quant_data::nmse(got.data(), ref.data(), cols), kDequantNmse);
    }
  }
}

// Activation row x as path k's vec_dot_rows takes it for weight type t (appended to act), and
// the values the reference multiplies: x itself, or x rounded to bf16 where the path rounds it.
std::vector<float> prepare_acts(const QuantKernels& k, GgmlType t, const std::vector<float>& x,
                                uint8_t* act) {
  const int64_t cols = int64_t(x.size());
  if (t != GgmlType::BF16 || k.acts_to_bf16 == nullptr) {
    quantize_act_ref(dot_type_of(t), x.data(), act, cols);
    return x;
  }
  std::vector<float> rounded(x.size());
  for (int64_t c = 0; c < cols; ++c) {
    const uint16_t b = f32_to_bf16(x[c]);
    std::memcpy(act + 2 * c, &b, 2);
    rounded[c] = bf16_to_f32(b);
  }
  return rounded;
}

TEST(QuantKernels, DotProductsMatchReferenceOnEveryPath) {
  const int64_t rows = 13;
  for (const QuantKernels* k : supported_paths()) {
    for (GgmlType t : weight_types()) {
      SCOPED_TRACE(std::string(k->name) + " " + ggml_type_name(t));
      const int64_t cols = test_cols(t) + (ggml_block_size(t) == 1 ? 3 : 0);
      const size_t rb = *ggml_row_bytes(t, cols);
      const auto w = quant_data::random_rows(t, rows, cols, 21);
      const int n_act = 3;
      const size_t ab = act_bytes_of(*k, t, cols);
      const size_t rab = act_row_bytes(t, cols);  // the reference's activation rows
      std::vector<uint8_t> act(ab * n_act), ref_act(rab * n_act);
      for (int a = 0; a < n_act; ++a) {
        const auto x =
            prepare_acts(*k, t, quant_data::random_activations(cols, 30 + a), act.data() + ab * a);
        quantize_act_ref(dot_type_of(t), x.data(), ref_act.data() + rab * a, cols);
      }
      std::vector<float> ref(rows * n_act), got(rows * n_act, 1e30f);
      for (int a = 0; a < n_act; ++a)
        for (int64_t r = 0; r < rows; ++r)
          ref[a * rows + r] = vec_dot_ref(t, cols, w.data() + rb * r, ref_act.data() + rab * a);
      // rows [2, rows) only: the first two must stay untouched
      k->vec_dot_rows(t, cols, w.data(), rb, 2, rows, act.data(), ab, n_act, got.data(), rows);
      for (int a = 0; a < n_act; ++a) {
        EXPECT_EQ(got[a * rows], 1e30f);
        EXPECT_EQ(got[a * rows + 1], 1e30f);
        got[a * rows] = ref[a * rows];
        got[a * rows + 1] = ref[a * rows + 1];
      }
      EXPECT_LE(quant_data::nmse(got.data(), ref.data(), int64_t(got.size())), kDotNmse);
    }
  }
}

// The NMSE of the outputs a kernel was to write (ref not 1e30); the others, filled with 1e30
// before the call, must stay untouched.
double nmse_of_written(const std::vector<float>& got, const std::vector<float>& ref) {
  std::vector<float> g, e;
  for (size_t i = 0; i < got.size(); ++i) {
    if (ref[i] == 1e30f) {
      EXPECT_EQ(got[i], 1e30f) << i;
    } else {
      g.push_back(got[i]);
      e.push_back(ref[i]);
    }
  }
  return quant_data::nmse(g.data(), e.data(), int64_t(g.size()));
}

// Float weights against every tile shape of the row kernels (1 to 4 weight rows by 1 to 4
// activation rows per pass, more activation rows in two passes) and the masked tail of the last
// cols % 32 values, against the reference on the same activations (for BF16 on paths with bf16
// dots, rounded to bf16 as the path rounds them). Products of two bf16 values are exact in f32,
// and f16 x f32 products differ only by rounding, so only the summation order differs: the dots
// agree to f32 rounding (NMSE 1e-10, the other paths' bound). Returns the cases checked.
int check_row_tiles(const QuantKernels& k, GgmlType t) {
  int tested = 0;
  for (int64_t cols : {int64_t(7), int64_t(32), int64_t(160), int64_t(901)}) {
    const int64_t rows = 11;
    const size_t rb = *ggml_row_bytes(t, cols);
    const auto w = quant_data::random_rows(t, rows, cols, uint32_t(60 + cols));
    for (int n_act : {1, 2, 3, 4, 5, 8}) {
      for (auto [r0, r1] : {std::pair{0, 1}, {1, 3}, {2, 5}, {3, 7}, {0, 11}}) {
        SCOPED_TRACE(std::string(k.name) + " " + ggml_type_name(t) +
                     " cols=" + std::to_string(cols) + " n_act=" + std::to_string(n_act) +
                     " rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ")");
        const size_t ab = act_bytes_of(k, t, cols);
        std::vector<uint8_t> act(ab * n_act);
        std::vector<std::vector<float>> xr;
        for (int a = 0; a < n_act; ++a)
          xr.push_back(prepare_acts(k, t, quant_data::random_activations(cols, 70 + a),
                                    act.data() + ab * a));
        std::vector<float> got(rows * n_act, 1e30f), ref(got.size(), 1e30f);
        for (int a = 0; a < n_act; ++a)
          for (int64_t r = r0; r < r1; ++r)
            ref[a * rows + r] = vec_dot_ref(t, cols, w.data() + rb * r, xr[a].data());
        k.vec_dot_rows(t, cols, w.data(), rb, r0, r1, act.data(), ab, n_act, got.data(), rows);
        EXPECT_LE(nmse_of_written(got, ref), kDotNmse);  // the rows in [r0, r1)
        ++tested;
      }
    }
  }
  return tested;
}

TEST(QuantKernels, Bf16DotsMatchReferenceAtEveryTileShape) {
  int tested = 0;
  for (const QuantKernels* k : supported_paths()) {
    if (k->acts_to_bf16 == nullptr) continue;
    ASSERT_EQ(act_bytes_of(*k, GgmlType::BF16, 32), size_t(64));
    tested += check_row_tiles(*k, GgmlType::BF16);
  }
  if (tested == 0) GTEST_SKIP() << "no path with bf16 dot products on this CPU";
}

// Float rows on every path (the AVX-512 ones run 4 rows by up to 4 activation rows per pass;
// BF16 there against f32 activations where the path has no bf16 dots).
TEST(QuantKernels, FloatDotsMatchReferenceAtEveryTileShape) {
  for (const QuantKernels* k : supported_paths())
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
      EXPECT_GT(check_row_tiles(*k, t), 0);
}

// Every path's prefill GEMM at tile edges: m rows of x against nw panel rows (x's row tiles, the
// panel's column strips and their masked tails), k across the kernels' k chunks. The values are
// exact in bf16, so the products are exact in every panel format and only the summation order
// differs from the double reference.
TEST(QuantKernels, PanelGemmMatchesReferenceAtEveryTileShape) {
  auto bf16_exact = [](float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u &= 0xffff0000u;
    std::memcpy(&v, &u, 4);
    return v;
  };
  for (const QuantKernels* k : supported_paths()) {
    for (int64_t kk : {int64_t(32), int64_t(288), int64_t(544)}) {
      for (int64_t m : {int64_t(1), int64_t(5), int64_t(6), int64_t(7), int64_t(13)}) {
        for (int64_t nw : {int64_t(1), int64_t(16), int64_t(17), int64_t(53), int64_t(64)}) {
          SCOPED_TRACE(std::string(k->name) + " m=" + std::to_string(m) +
                       " nw=" + std::to_string(nw) + " k=" + std::to_string(kk));
          std::vector<float> x = quant_data::random_activations(m * kk, uint32_t(80 + m));
          std::vector<float> w = quant_data::random_activations(nw * kk, uint32_t(90 + nw));
          for (float& v : x) v = bf16_exact(v);
          for (float& v : w) v = bf16_exact(v);
          const size_t elem = k->panel == PanelFormat::F32 ? 4 : 2;
          std::vector<uint8_t> panel(size_t(nw * kk) * elem);
          for (int64_t j = 0; j < nw; ++j) {
            if (k->to_panel == nullptr) {
              std::memcpy(panel.data() + size_t(j * kk) * 4, w.data() + j * kk, size_t(kk) * 4);
            } else {
              k->to_panel(w.data() + j * kk, panel.data() + size_t(j * kk) * elem, kk);
            }
          }
          std::vector<uint8_t> packed;
          const void* xp = x.data();
          if (k->pack_x != nullptr) {
            packed.resize(k->packed_x_bytes(m, kk));
            k->pack_x(x.data(), m, kk, packed.data());
            xp = packed.data();
          }
          const int64_t ldy = nw + 3;  // y's rows wider than the panel: the rest stays untouched
          std::vector<float> got(size_t(m * ldy), 1e30f), ref(got.size(), 1e30f);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < nw; ++j) {
              double acc = 0;
              for (int64_t c = 0; c < kk; ++c) acc += double(x[i * kk + c]) * w[j * kk + c];
              ref[i * ldy + j] = float(acc);
            }
          k->gemm(m, nw, kk, xp, panel.data(), kk, got.data(), ldy);
          EXPECT_LE(nmse_of_written(got, ref), kDotNmse);
        }
      }
    }
  }
}

// gemm_f16 and gemm_bf16 (the avx2 paths: F16 / BF16 rows as the file holds them, widened while
// the GEMM packs its strips) give the table's f32 gemm on the rows' dequantized f32 panel to the
// bit, at every tile edge (x's row tiles, the 16-row strips and their zero-padded tails, two k
// chunks), with the rows ldw values apart as in a wider matrix; and both agree with a double
// reference to f32 rounding (kDotNmse).
TEST(QuantKernels, HalfRowGemmsGiveThePanelGemmsFloatsToTheBit) {
  int tested = 0;
  for (const QuantKernels* k : supported_paths()) {
    ASSERT_EQ(k->gemm_f16 == nullptr, k->gemm_bf16 == nullptr);
    if (k->gemm_f16 == nullptr) continue;
    ASSERT_EQ(k->panel, PanelFormat::F32);
    ASSERT_EQ(k->pack_x, nullptr);
    for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
      const auto gemm_rows = t == GgmlType::F16 ? k->gemm_f16 : k->gemm_bf16;
      for (int64_t kk : {int64_t(32), int64_t(288), int64_t(544)}) {
        for (int64_t m : {int64_t(1), int64_t(5), int64_t(6), int64_t(7), int64_t(13)}) {
          for (int64_t nw : {int64_t(1), int64_t(9), int64_t(16), int64_t(17), int64_t(53)}) {
            const int64_t ldw = kk + 64;  // rows of a wider matrix: only the first kk are read
            SCOPED_TRACE(std::string(k->name) + " " + ggml_type_name(t) +
                         " m=" + std::to_string(m) + " nw=" + std::to_string(nw) +
                         " k=" + std::to_string(kk));
            const auto rows = quant_data::random_rows(t, nw, ldw, uint32_t(30 + nw));
            std::vector<float> x = quant_data::random_activations(m * kk, uint32_t(20 + m));
            std::vector<float> panel(size_t(nw * kk));
            for (int64_t j = 0; j < nw; ++j)
              dequantize_row_ref(t, rows.data() + size_t(j * ldw) * 2, panel.data() + j * kk, kk);
            const int64_t ldy = nw + 3;  // the rest of y's rows stays untouched
            std::vector<float> got(size_t(m * ldy), 1e30f), want(got.size(), 1e30f);
            std::vector<float> ref(got.size(), 1e30f);
            gemm_rows(m, nw, kk, x.data(), rows.data(), ldw, got.data(), ldy);
            k->gemm(m, nw, kk, x.data(), panel.data(), kk, want.data(), ldy);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < nw; ++j) {
                double acc = 0;
                for (int64_t c = 0; c < kk; ++c) acc += double(x[i * kk + c]) * panel[j * kk + c];
                ref[i * ldy + j] = float(acc);
              }
            EXPECT_LE(nmse_of_written(got, ref), kDotNmse);
            ++tested;
          }
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no path with f16 / bf16 row gemms on this CPU";
}

// A float weight row's dot with an activation row is the same float whatever shares its pass (1
// to 4 weight rows, 1 to 4 activation rows, where the pass starts): the row kernels keep one
// summation order per pair, which decode's batch invariance needs (model/DecodeInvariance).
TEST(QuantKernels, FloatRowDotsDoNotDependOnThePass) {
  const int64_t rows = 11;
  for (const QuantKernels* k : supported_paths()) {
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
      for (int64_t cols : {int64_t(32), int64_t(901)}) {
        SCOPED_TRACE(std::string(k->name) + " " + ggml_type_name(t) +
                     " cols=" + std::to_string(cols));
        const size_t rb = *ggml_row_bytes(t, cols), ab = act_bytes_of(*k, t, cols);
        const auto w = quant_data::random_rows(t, rows, cols, uint32_t(5 + cols));
        const int n_act = 4;
        std::vector<uint8_t> act(ab * n_act);
        for (int a = 0; a < n_act; ++a)
          prepare_acts(*k, t, quant_data::random_activations(cols, 40 + a), act.data() + ab * a);
        std::vector<float> all(size_t(rows * n_act)), one(all.size());
        k->vec_dot_rows(t, cols, w.data(), rb, 0, rows, act.data(), ab, n_act, all.data(), rows);
        for (int a = 0; a < n_act; ++a)
          for (int64_t r = 0; r < rows; ++r)  // alone: one weight row, one activation row
            k->vec_dot_rows(t, cols, w.data(), rb, r, r + 1, act.data() + ab * a, ab, 1,
                            one.data() + a * rows, rows);
        EXPECT_EQ(all, one);
      }
    }
  }
}

// Six blocks of `block` activations, one of each case the quantizers must agree on: random, all
// zero, ties at .5 of both signs (the block's amax is 127, so 1 / d is exactly 1 and x.5 values
// test the rounding of halves to even), tiny and large values; then 64 random blocks, each
// scaled by its own power of ten (1e-4 .. 1e3), where products fall near halves by chance.
std::vector<float> q8_test_activations(int64_t block, uint32_t seed) {
  std::vector<float> x = quant_data::random_activations(70 * block, seed);
  float* v = x.data();
  for (int64_t j = 0; j < block; ++j) {
    v[block + j] = 0.0f;
    v[2 * block + j] = j == 0 ? 127.0f : float(j % 16 - 8) + 0.5f;
    v[3 * block + j] = j == 0 ? -127.0f : -float(j % 120) - 0.5f;
    v[4 * block + j] *= 1e-6f;
    v[5 * block + j] *= 3e4f;
  }
  for (int64_t b = 6; b < 70; ++b)
    for (int64_t j = 0; j < block; ++j) v[b * block + j] *= std::pow(10.0f, float(b % 8 - 4));
  return x;
}

// A path's q8_0 and q8_K activation quantizers write the reference's bytes (q8_K: with its sums
// of each 16 quants).
TEST(QuantKernels, Q8ActivationsEqualTheReferenceByteForByte) {
  using Quantizer = void (*)(const float*, void*, int64_t);
  struct Case {
    GgmlType type;
    int64_t block;
    Quantizer QuantKernels::*fn;
  };
  const Case cases[] = {{GgmlType::Q8_0, 32, &QuantKernels::quantize_q8_0},
                        {GgmlType::Q8_K, 256, &QuantKernels::quantize_q8_K}};
  int tested = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(ggml_type_name(c.type));
    const std::vector<float> x = q8_test_activations(c.block, 90);
    const int64_t n = int64_t(x.size());
    const size_t bytes = *ggml_row_bytes(c.type, n);
    std::vector<uint8_t> ref(bytes), got(bytes);
    quantize_act_ref(c.type, x.data(), ref.data(), n);
    for (const QuantKernels* k : supported_paths()) {
      // every vector path has its own quantizers (avx2 since issue 51)
      EXPECT_EQ(k->*c.fn == nullptr, k->level == IsaLevel::Scalar) << k->name;
      if (k->*c.fn == nullptr) continue;
      SCOPED_TRACE(k->name);
      std::fill(got.begin(), got.end(), uint8_t(0xa5));
      (k->*c.fn)(x.data(), got.data(), n);
      EXPECT_EQ(got, ref);
      ++tested;
    }
  }
  if (tested == 0) GTEST_SKIP() << "no path with its own q8 quantizers on this CPU";
}

// One block of activations and what ggml's CPU quantizer writes for it, from its documented
// arithmetic (ggml-cpu quantize_row_q8_0 on x86, ggml-base quantize_row_q8_K_ref): q8_0: amax =
// max |x|, d = amax / 127 rounded to f16 to nearest even, id = 127 / amax (0 for amax 0), q =
// the f32 product x * id rounded to nearest even; q8_K: m = the first x of the largest |x|, s =
// -127 / m, q = min(127, the f32 product s * x rounded to nearest even), d = 1 / s (f32). The
// values not listed are 0 (q 0).
struct TieCase {
  const char* what;
  GgmlType type;
  std::vector<std::pair<int, float>> x;   // (index, value)
  uint32_t d_bits;                        // q8_0: the f16 bits; q8_K: the f32 bits
  std::vector<std::pair<int, int8_t>> q;  // (index, quant)
};

std::vector<TieCase> tie_cases() {
  // With amax 3, id = 127 / 3 = 0x1.52aaaap+5: these x's f32 products land exactly on 0.5 and
  // 8.5 although the exact products are 0.50000002 and 8.50000011: the rounded product is
  // rounded again (to even: 0 and 8), as ggml does (an exact or fused product gives 1 and 9).
  const float p05 = 0x1.83060ep-7f, p85 = 0x1.9b366ep-3f;
  // amax = 127 x 1307.5 x 2^-17 (exact): d = 1307.5 x 2^-17 is an f16 tie, to even = 1308 x
  // 2^-17 (0x211c); one ulp below it rounds down (0x211b); 127 x 1308.5 x 2^-17 down to 0x211c.
  const float tie_up = std::ldexp(332105.0f, -18), tie_down = std::ldexp(332359.0f, -18);
  const float q8k_d = 1.0f / (-127.0f / 3.0f);
  return {
      {"q8_0 halves to even",
       GgmlType::Q8_0,
       {{0, 127.0f},
        {1, 2.5f},
        {2, 3.5f},
        {3, -2.5f},
        {4, -0.5f},
        {5, 126.5f},
        {6, 0.5f},
        {7, 1.5f},
        {8, -126.5f}},
       0x3c00,
       {{0, 127}, {1, 2}, {2, 4}, {3, -2}, {4, 0}, {5, 126}, {6, 0}, {7, 2}, {8, -126}}},
      {"q8_0 rounds the rounded product",
       GgmlType::Q8_0,
       {{0, 3.0f}, {1, p05}, {2, p85}, {3, -p85}},
       0x260c,  // f16(3 / 127)
       {{0, 127}, {1, 0}, {2, 8}, {3, -8}}},
      {"q8_0 scale on an f16 tie, up", GgmlType::Q8_0, {{5, -tie_up}}, 0x211c, {{5, -127}}},
      {"q8_0 scale just below it",
       GgmlType::Q8_0,
       {{5, std::nextafter(tie_up, 0.0f)}},
       0x211b,
       {{5, 127}}},
      {"q8_0 scale on an f16 tie, down", GgmlType::Q8_0, {{9, tie_down}}, 0x211c, {{9, 127}}},
      {"q8_0 zero block", GgmlType::Q8_0, {}, 0x0000, {}},
      {"q8_K halves to even (s = 1)",
       GgmlType::Q8_K,
       {{0, -127.0f}, {1, -2.5f}, {2, -3.5f}, {3, 2.5f}, {200, -126.5f}, {255, 126.5f}},
       std::bit_cast<uint32_t>(1.0f),
       {{0, -127}, {1, -2}, {2, -4}, {3, 2}, {200, -126}, {255, 126}}},
      {"q8_K first of both signs of the max",
       GgmlType::Q8_K,
       {{7, 3.0f}, {9, -3.0f}, {10, p05}, {11, -p85}},
       std::bit_cast<uint32_t>(q8k_d),
       {{7, -127}, {9, 127}, {10, 0}, {11, 8}}},
      {"q8_K zero block", GgmlType::Q8_K, {}, 0, {}},
  };
}

// A path's quantizer (or the reference) on one block of a TieCase: d's bits, the quants, and for
// q8_K the sums of each 16.
void expect_tie_case(const TieCase& c, const uint8_t* got) {
  const int block = c.type == GgmlType::Q8_K ? 256 : 32;
  std::vector<int8_t> want_q(size_t(block), 0);
  for (auto [i, q] : c.q) want_q[size_t(i)] = q;
  const int8_t* q = nullptr;
  if (c.type == GgmlType::Q8_K) {
    const auto& b = *reinterpret_cast<const BlockQ8_K*>(got);
    EXPECT_EQ(std::bit_cast<uint32_t>(b.d), c.d_bits);
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += want_q[size_t(16 * g + j)];
      EXPECT_EQ(b.bsums[g], s) << "sum " << g;
    }
    q = b.qs;
  } else {
    const auto& b = *reinterpret_cast<const BlockQ8_0*>(got);
    EXPECT_EQ(b.d, c.d_bits);
    q = b.qs;
  }
  for (int j = 0; j < block; ++j) EXPECT_EQ(int(q[j]), int(want_q[size_t(j)])) << "value " << j;
}

// The q8_0 and q8_K quantizers, the reference and every path's own, write what ggml's CPU
// backend writes at rounding ties: halves, products that round onto a half, a scale on an f16
// tie (a last-bit change of the block's largest value moves it a whole f16 step), both signs of
// the largest value, a zero block.
TEST(QuantKernels, Q8ActivationsRoundAsGgmlAtTies) {
  for (const TieCase& c : tie_cases()) {
    SCOPED_TRACE(c.what);
    const int block = c.type == GgmlType::Q8_K ? 256 : 32;
    std::vector<float> x(size_t(block), 0.0f);
    for (auto [i, v] : c.x) x[size_t(i)] = v;
    std::vector<uint8_t> got(*ggml_row_bytes(c.type, block));
    {
      SCOPED_TRACE("reference");
      quantize_act_ref(c.type, x.data(), got.data(), block);
      expect_tie_case(c, got.data());
    }
    for (const QuantKernels* k : supported_paths()) {
      const auto fn = c.type == GgmlType::Q8_K ? k->quantize_q8_K : k->quantize_q8_0;
      if (fn == nullptr) continue;
      SCOPED_TRACE(k->name);
      std::fill(got.begin(), got.end(), uint8_t(0xa5));
      fn(x.data(), got.data(), block);
      expect_tie_case(c, got.data());
    }
  }
}

// NMSE of matmul against x * dequantized(W)^T in double. Decode and prefill both quantize the
// activations of quantized weights to 8 bits: per 32 values (q8_0, q8_1) that measures 3e-5 to
// 1e-4 here, per 256 (q8_K, where one outlier sets the step of 256 values) 2e-4 to 6e-4. bf16
// panels (float weights' prefill on bf16 paths) and BF16 weights' decode on those paths
// (activations rounded to bf16: 2^-9 relative per value) cost about 1e-5; f32 only rounding.
double matmul_bound(const QuantKernels& k, GgmlType t, int64_t n) {
  const GgmlType dt = dot_type_of(t);
  if (dt != GgmlType::F32) return dt == GgmlType::Q8_K ? 1.5e-3 : 3e-4;
  if (n <= kQuantDecodeMaxRows)
    return t == GgmlType::BF16 && k.acts_to_bf16 != nullptr ? 1e-4 : 1e-10;
  return k.panel == PanelFormat::F32 ? 1e-10 : 1e-4;
}

TEST(QuantKernels, MatmulMatchesDequantizedProductOnEveryPath) {
  ThreadPool pool(2);
  const int64_t rows = 53;  // not a multiple of any tile, nor of the prefill panel
  for (const QuantKernels* k : supported_paths()) {
    for (GgmlType t : weight_types()) {
      const int64_t cols = test_cols(t);
      const auto wbytes = quant_data::random_rows(t, rows, cols, 41);
      auto wv = make_weight_view(t, wbytes.data(), rows, cols);
      ASSERT_TRUE(wv.ok()) << wv.message();
      std::vector<float> wf(static_cast<size_t>(rows * cols));
      dequantize_row_ref(t, wbytes.data(), wf.data(), rows * cols);
      std::vector<float> bias(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) bias[r] = 0.01f * float(r % 7);
      for (int64_t n : {int64_t(1), int64_t(3), int64_t(17), int64_t(40)}) {
        SCOPED_TRACE(std::string(k->name) + " " + ggml_type_name(t) + " n=" + std::to_string(n));
        const auto x = quant_data::random_activations(n * cols, uint32_t(50 + n));
        std::vector<float> ref(static_cast<size_t>(n * rows)), got(ref.size(), 1e30f);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t r = 0; r < rows; ++r) {
            double s = 0.0;
            for (int64_t c = 0; c < cols; ++c) s += double(x[i * cols + c]) * wf[r * cols + c];
            ref[i * rows + r] = float(s) + bias[r];
          }
        matmul_with(*k, *k, *wv, x.data(), n, bias.data(), got.data(), pool);
        EXPECT_LE(quant_data::nmse(got.data(), ref.data(), int64_t(ref.size())),
                  matmul_bound(*k, t, n));
      }
    }
  }
}

// Prefill (n > kQuantDecodeMaxRows rows through dequantized panels) computes what decode computes
// row by row, as ggml's CPU matmul does at every batch size: the activations of quantized weights
// are quantized to the dot type in both, so the two differ by f32 rounding only (measured NMSE
// below 1e-12 on every path here). Before prefill quantized them, the gap was the activation
// quantization itself: NMSE 3e-5 to 6e-4.
// The same over weights repacked in groups of 16 rows (48 of them): prefill and decode both run
// the layout's integer kernel where the path has one (4 activation rows per pass against 1), else
// the groups unpacked.
TEST(QuantKernels, PrefillEqualsDecodeRowByRowOnEveryPath) {
  ThreadPool pool(2);
  const int64_t n = 24;
  for (const QuantKernels* k : supported_paths()) {
    for (GgmlType t : weight_types()) {
      if (dot_type_of(t) == GgmlType::F32) continue;
      const int64_t cols = test_cols(t);
      const auto wbytes = quant_data::random_rows(t, 53, cols, 43);
      const auto x = quant_data::random_activations(n * cols, 77);
      // the bf16-panel tables decode with avx512_vnni's kernels, as matmul pairs them
      const QuantKernels& dk = k->panel == PanelFormat::F32 ? *k : avx512_vnni_kernels();
      std::vector<uint8_t> packed;
      for (const bool repacked : {false, true}) {
        const int64_t rows = 53;  // repacked: three groups and a padded one
        auto wv = make_weight_view(t, wbytes.data(), rows, cols);
        ASSERT_TRUE(wv.ok()) << wv.message();
        if (repacked) {
          if (!x16_fits(*wv)) continue;
          packed.resize(x16_bytes(*wv));
          repack_x16(*wv, 0, x16_group_count(rows), packed.data());
          wv->data = packed.data();
          wv->layout = x16_layout_of(t);
        }
        const std::string what =
            std::string(k->name) + " " + ggml_type_name(t) + (repacked ? " repacked" : "");
        SCOPED_TRACE(what);
        std::vector<float> batch(size_t(n * rows)), rowwise(batch.size());
        matmul_with(dk, *k, *wv, x.data(), n, nullptr, batch.data(), pool);
        for (int64_t i = 0; i < n; ++i)
          matmul_with(dk, *k, *wv, x.data() + i * cols, 1, nullptr, rowwise.data() + i * rows,
                      pool);
        const double e = quant_data::nmse(batch.data(), rowwise.data(), int64_t(batch.size()));
        std::printf("%s: prefill vs decode NMSE %.2g\n", what.c_str(), e);
        EXPECT_LE(e, 1e-10);
      }
    }
  }
}

TEST(QuantKernels, DequantizeRowsGivesTheRequestedRows) {
  const GgmlType t = GgmlType::Q4_K;
  const int64_t rows = 9, cols = 512;
  const auto w = quant_data::random_rows(t, rows, cols, 3);
  auto wv = make_weight_view(t, w.data(), rows, cols);
  ASSERT_TRUE(wv.ok());
  std::vector<float> got(3 * cols), ref(rows * cols);
  dequantize_rows(*wv, 4, 3, got.data());
  dequantize_row_ref(t, w.data(), ref.data(), rows * cols);
  EXPECT_LE(quant_data::nmse(got.data(), ref.data() + 4 * cols, 3 * cols), kDequantNmse);
}

TEST(QuantKernels, WeightViewRejectsBadShapesAndTypes) {
  const uint8_t b[64] = {};
  EXPECT_EQ(make_weight_view(GgmlType::IQ2_XXS, b, 1, 256).code(), ErrorCode::Unsupported);
  EXPECT_EQ(make_weight_view(GgmlType::Q4_K, b, 1, 896).code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(make_weight_view(GgmlType::Q8_0, nullptr, 2, 32).code(), ErrorCode::InvalidArgument);
  auto ok = make_weight_view(GgmlType::Q8_0, b, 1, 32);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->row_bytes, 34u);
}

}  // namespace
}  // namespace kamera::quant
