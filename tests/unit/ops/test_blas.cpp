// The f32 GEMM path: OpenBLAS runs kernels of the CPU's ISA level, and every entry point of
// ops/gemm.h equals a naive double-precision product (M = 1, N = 1, odd sizes, transposes,
// strides, alpha/beta) on every kernel table this CPU can run.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "ops/blas_select.h"
#include "ops/gemm.h"

namespace {

using kamera::IsaLevel;
using kamera::Trans;

TEST(BlasPath, KernelsMatchTheCpuIsaLevel) {
  // A core named on purpose is not checked; KAMERA_BLAS_CORE=keep (OpenBLAS as it loaded) is.
  const char* forced = std::getenv("KAMERA_BLAS_CORE");
  if ((forced && std::string(forced) != "keep" && std::string(forced) != "auto") ||
      std::getenv("OPENBLAS_CORETYPE"))
    GTEST_SKIP() << "the BLAS core is forced by KAMERA_BLAS_CORE or OPENBLAS_CORETYPE";
  const kamera::BlasInfo info = kamera::blas_info();
  IsaLevel want = kamera::isa_level();
  if (want > IsaLevel::Avx512) want = IsaLevel::Avx512;  // OpenBLAS's best f32 kernels
  EXPECT_STREQ(kamera::isa_level_name(info.wanted_level), kamera::isa_level_name(want));
  EXPECT_STREQ(kamera::isa_level_name(info.core_level), kamera::isa_level_name(want))
      << "f32 GEMMs run " << kamera::isa_level_name(info.core_level) << " kernels on a "
      << kamera::isa_level_name(kamera::isa_level()) << " CPU: " << kamera::blas_path();
  // The name reported is the one OpenBLAS itself reports in its configuration string.
  EXPECT_NE(info.config.find(info.core), std::string::npos) << info.config;
  EXPECT_NE(kamera::blas_path().find(info.core), std::string::npos);
}

TEST(BlasPath, CoreLevels) {
  EXPECT_EQ(kamera::openblas_core_level("SkylakeX"), IsaLevel::Avx512);
  EXPECT_EQ(kamera::openblas_core_level("COOPERLAKE"), IsaLevel::Avx512);
  EXPECT_EQ(kamera::openblas_core_level("Haswell"), IsaLevel::Avx2);
  EXPECT_EQ(kamera::openblas_core_level("zen"), IsaLevel::Avx2);
  EXPECT_EQ(kamera::openblas_core_level("Sandybridge"), IsaLevel::Scalar);
  EXPECT_EQ(kamera::openblas_core_level("Prescott"), IsaLevel::Scalar);
}

TEST(BlasPath, RefusesUnknownAndTooHighCores) {
  if (!kamera::blas_info().selectable) GTEST_SKIP() << "OpenBLAS is not a DYNAMIC_ARCH build";
  const std::string before = kamera::blas_info().core;
  EXPECT_EQ(kamera::set_blas_core("NoSuchCore").code(), kamera::ErrorCode::NotFound);
  if (kamera::cpu_isa_level() < IsaLevel::Avx512) {
    EXPECT_EQ(kamera::set_blas_core("SkylakeX").code(), kamera::ErrorCode::InvalidArgument);
  }
  EXPECT_EQ(kamera::blas_info().core, before);
}

// Naive reference in double: C = alpha op(A) op(B) + beta C, and the bound each element's error
// may reach in f32 (a few ulps of the sum of |products|).
struct Problem {
  int M, N, K;
  Trans ta, tb;
  float alpha, beta;
};

void check_gemm(const Problem& p, std::mt19937& rng) {
  const bool at = p.ta == Trans::Yes, bt = p.tb == Trans::Yes;
  const int lda = (at ? p.M : p.K) + 3, ldb = (bt ? p.K : p.N) + 2, ldc = p.N + 5;
  const int a_rows = at ? p.K : p.M, b_rows = bt ? p.N : p.K;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> A(size_t(a_rows) * lda), B(size_t(b_rows) * ldb), C(size_t(p.M) * ldc);
  for (auto& x : A) x = u(rng);
  for (auto& x : B) x = u(rng);
  for (auto& x : C) x = p.beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  const std::vector<float> C0 = C;
  kamera::gemm(p.ta, p.tb, p.M, p.N, p.K, p.alpha, A.data(), lda, B.data(), ldb, p.beta, C.data(),
               ldc);
  for (int i = 0; i < p.M; ++i)
    for (int j = 0; j < ldc; ++j) {
      const size_t at_c = size_t(i) * ldc + j;
      if (j >= p.N) {  // padding between rows is never written
        ASSERT_TRUE(std::isnan(C[at_c]) ? std::isnan(C0[at_c]) : C[at_c] == C0[at_c]);
        continue;
      }
      double ref = 0, mag = 0;
      for (int k = 0; k < p.K; ++k) {
        const double a = at ? A[size_t(k) * lda + i] : A[size_t(i) * lda + k];
        const double b = bt ? B[size_t(j) * ldb + k] : B[size_t(k) * ldb + j];
        ref += a * b;
        mag += std::fabs(a * b);
      }
      ref *= p.alpha;
      mag *= std::fabs(p.alpha);
      if (p.beta != 0.0f) {
        ref += double(p.beta) * C0[at_c];
        mag += std::fabs(double(p.beta) * C0[at_c]);
      }
      const double bound = 4.0 * (p.K + 2) * std::numeric_limits<float>::epsilon() * mag + 1e-30;
      ASSERT_LE(std::fabs(C[at_c] - ref), bound)
          << "M=" << p.M << " N=" << p.N << " K=" << p.K << " ta=" << at << " tb=" << bt
          << " alpha=" << p.alpha << " beta=" << p.beta << " at (" << i << ", " << j << ")";
    }
}

void check_all_shapes() {
  std::mt19937 rng(7);
  const int shapes[][3] = {{1, 1, 1},    {1, 37, 19},  {1, 300, 257}, {33, 1, 17},
                           {7, 13, 5},   {16, 16, 16}, {65, 47, 129}, {130, 9, 64},
                           {2, 513, 31}, {96, 200, 8}, {5, 3, 0}};
  const float ab[][2] = {{1.0f, 0.0f}, {0.5f, -2.0f}, {-1.0f, 1.0f}};
  for (const auto& s : shapes)
    for (Trans ta : {Trans::No, Trans::Yes})
      for (Trans tb : {Trans::No, Trans::Yes})
        for (const auto& c : ab) {
          check_gemm({s[0], s[1], s[2], ta, tb, c[0], c[1]}, rng);
          if (::testing::Test::HasFatalFailure()) return;
        }
}

TEST(Gemm, EqualsNaiveReferenceOnTheSelectedKernels) {
  check_all_shapes();
}

// The same on every kernel table this CPU can run (SSE3 Prescott, AVX2 Haswell, AVX-512
// SkylakeX), so a host that selects another table is covered too; the selection is put back.
TEST(Gemm, EqualsNaiveReferenceOnEveryRunnableKernelTable) {
  if (!kamera::blas_info().selectable) GTEST_SKIP() << "OpenBLAS is not a DYNAMIC_ARCH build";
  const std::string chosen = kamera::blas_info().core;
  for (const char* core : {"Prescott", "Haswell", "SkylakeX"}) {
    if (kamera::openblas_core_level(core) > kamera::cpu_isa_level()) continue;
    const kamera::Status s = kamera::set_blas_core(core);
    ASSERT_TRUE(s.ok()) << s.message();
    SCOPED_TRACE(core);
    check_all_shapes();
    if (HasFatalFailure()) break;
  }
  ASSERT_TRUE(kamera::set_blas_core(chosen).ok());
  EXPECT_EQ(kamera::blas_info().core, chosen);
}

TEST(Gemm, MatmulWtWithAndWithoutBias) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int T : {1, 2, 9}) {
    const int in = 23, out = 31;
    std::vector<float> x(size_t(T) * in), w(size_t(out) * in), bias(out), y(size_t(T) * out);
    for (auto& v : x) v = u(rng);
    for (auto& v : w) v = u(rng);
    for (auto& v : bias) v = u(rng);
    for (const float* b : std::array<const float*, 2>{nullptr, bias.data()}) {
      std::fill(y.begin(), y.end(), std::numeric_limits<float>::quiet_NaN());
      kamera::matmul_wt(x.data(), w.data(), b, y.data(), T, in, out);
      for (int t = 0; t < T; ++t)
        for (int o = 0; o < out; ++o) {
          double ref = b ? b[o] : 0.0;
          for (int i = 0; i < in; ++i) ref += double(x[size_t(t) * in + i]) * w[size_t(o) * in + i];
          ASSERT_NEAR(y[size_t(t) * out + o], ref, 1e-5) << "T=" << T << " bias=" << (b != nullptr);
        }
    }
  }
}

}  // namespace
