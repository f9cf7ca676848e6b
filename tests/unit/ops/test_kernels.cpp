// Every kernel's fast path against its scalar reference (ops/reference.h).
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

#include "core/thread_pool.h"
#include "ops/gemm.h"
#include "ops/kernels.h"
#include "ops/reference.h"

using namespace kamera;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// max |a - b| / max(|b|, floor)
double max_rel_err(const std::vector<float>& a, const std::vector<float>& b, double floor = 1e-6) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(double(a[i]) - b[i]) / std::max(std::fabs(double(b[i])), floor));
  return m;
}

}  // namespace

TEST(Kernels, ExpMatchesLibmWithin3Ulp) {
  std::vector<float> x;
  for (float v = -87.0f; v <= 88.0f; v += 0.0137f) x.push_back(v);
  std::vector<float> y = x;
  exp_inplace(y.data(), int(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp(x[i]);
    const float ulp = std::nextafter(want, INFINITY) - want;
    ASSERT_LE(std::fabs(y[i] - want), 3 * ulp) << "x = " << x[i];
  }
  float z[3] = {-INFINITY, -200.0f, 0.0f};
  exp_inplace(z, 3);
  EXPECT_EQ(z[0], 0.0f);
  EXPECT_EQ(z[1], 0.0f);
  EXPECT_EQ(z[2], 1.0f);
}

// e^x and SiLU round as llama.cpp's CPU backend (ggml-cpu's vectorized expf) rounds them, bit for
// bit: a last-bit difference in one SwiGLU value can move a q8_0 block's scale across an f16
// rounding step (tests/data/quantized/README.md). ggml's values of the same inputs are
// tests/data/ggml_exp/ggml_exp.f32 (its README has the command that wrote them).
TEST(Kernels, ExpAndSiluRoundAsGgmlsCpuBackend) {
  constexpr int n = 4096;
  std::vector<float> want(2 * n);
  {
    std::ifstream f(std::string(KAMERA_SOURCE_DIR) + "/tests/data/ggml_exp/ggml_exp.f32",
                    std::ios::binary);
    f.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * 4));
    ASSERT_TRUE(f) << "tests/data/ggml_exp/ggml_exp.f32";
  }
  std::vector<float> e(n), x(n), g(n);
  for (int i = 0; i < n; ++i) {
    e[size_t(i)] = -105.0f + 194.0f * float(i) / 4096.0f;
    const float m = std::ldexp(1.0f + float(i % 128) / 128.0f, i / 128 % 16 - 9);
    x[size_t(i)] = i < 2048 ? m : -m;
    g[size_t(i)] = i % 3 == 0 ? -0.75f : 1.0f;
  }
  exp_inplace(e.data(), n);
  silu_mul(x.data(), g.data(), n);
  auto bits = [](float v) { return std::bit_cast<uint32_t>(v); };
  int exp_diffs = 0, silu_diffs = 0;
  for (int i = 0; i < n; ++i) {
    exp_diffs += bits(e[size_t(i)]) != bits(want[size_t(i)]);
    silu_diffs += bits(x[size_t(i)]) != bits(want[size_t(n + i)]);
  }
  EXPECT_EQ(exp_diffs, 0) << "of " << n << " values of e^x differ from ggml's";
  EXPECT_EQ(silu_diffs, 0) << "of " << n << " values of silu(x) * g differ from ggml's";
}

// RMS norm rounds as llama.cpp's CPU backend: the squares summed in double in order, the mean
// rounded to f32 (ggml's rms_norm), so the normalized activations that the q8 quantizers see are
// ggml's bit for bit, whatever the compiler does with the loop. ggml's values:
// tests/data/ggml_exp/ggml_rms_norm.f32 (README.md there).
TEST(Kernels, RmsnormRoundsAsGgmlsCpuBackend) {
  constexpr int kDims[] = {7, 32, 64, 896, 4096}, kRows = 5;
  std::ifstream f(std::string(KAMERA_SOURCE_DIR) + "/tests/data/ggml_exp/ggml_rms_norm.f32",
                  std::ios::binary);
  for (int dim : kDims) {
    std::vector<float> x(size_t(dim) * kRows), want(x.size()), y(x.size());
    const std::vector<float> ones(size_t(dim), 1.0f);
    for (int r = 0; r < kRows; ++r)
      for (int i = 0; i < dim; ++i) {  // full 24-bit mantissas, as ref_rms_norm.cpp
        const uint32_t m =
            0x800000u | ((uint32_t(i) * 2654435761u + uint32_t(r) * 40503u) & 0x7fffffu);
        const float v = std::ldexp(float(m), r % 5 - 25);
        x[size_t(r) * dim + i] = (7 * i + r) % 3 == 0 ? -v : v;
      }
    f.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * 4));
    ASSERT_TRUE(f) << "tests/data/ggml_exp/ggml_rms_norm.f32";
    rmsnorm(x.data(), ones.data(), y.data(), kRows, dim, 1e-6f);
    int diffs = 0;
    for (size_t i = 0; i < y.size(); ++i)
      diffs += std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(want[i]);
    EXPECT_EQ(diffs, 0) << "of " << y.size() << " values differ from ggml's, dim " << dim;
  }
}

TEST(Kernels, RmsnormMatchesReference) {
  ThreadPool pool(2);
  for (int dim : {1, 7, 64, 896}) {
    const int rows = 13;
    auto x = randn(size_t(rows) * dim, 1, 3.0f), w = randn(dim, 2);
    std::vector<float> y(x.size()), r(x.size());
    rmsnorm(x.data(), w.data(), y.data(), rows, dim, 1e-5f, &pool);
    ref::rmsnorm(x.data(), w.data(), r.data(), rows, dim, 1e-5f);
    EXPECT_LT(max_rel_err(y, r, 1e-3), 1e-5) << "dim " << dim;
  }
}

TEST(Kernels, SoftmaxMatchesReference) {
  for (int n : {1, 5, 64, 1000}) {
    auto x = randn(n, 3, 8.0f), r = x;
    softmax(x.data(), n);
    ref::softmax(r.data(), n);
    EXPECT_LT(max_rel_err(x, r, 1e-30), 1e-5) << "n " << n;
    double s = 0;
    for (float v : x) s += v;
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
}

TEST(Kernels, SiluMulMatchesReference) {
  ThreadPool pool(2);
  const int n = 40000;
  auto g = randn(n, 4, 4.0f), u = randn(n, 5), r = g;
  silu_mul(g.data(), u.data(), n, &pool);
  ref::silu_mul(r.data(), u.data(), n);
  double m = 0;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(double(g[i]) - r[i]));
  EXPECT_LT(m, 1e-5);
}

TEST(Kernels, DotAxpyAdd) {
  auto a = randn(77, 6), b = randn(77, 7);
  double want = 0;
  for (int i = 0; i < 77; ++i) want += double(a[i]) * b[i];
  EXPECT_NEAR(dot(a.data(), b.data(), 77), want, 1e-4);
  auto y = b;
  axpy(0.5f, a.data(), y.data(), 77);
  for (int i = 0; i < 77; ++i) EXPECT_FLOAT_EQ(y[i], b[i] + 0.5f * a[i]);
  y = b;
  add_inplace(y.data(), a.data(), 77);
  for (int i = 0; i < 77; ++i) EXPECT_FLOAT_EQ(y[i], b[i] + a[i]);
}

TEST(Kernels, MatmulMatchesReference) {
  for (int T : {1, 3, 64}) {
    const int in = 96, out = 40;
    auto x = randn(size_t(T) * in, 8), w = randn(size_t(out) * in, 9), bias = randn(out, 10);
    for (const float* bp :
         {static_cast<const float*>(nullptr), static_cast<const float*>(bias.data())}) {
      std::vector<float> y(size_t(T) * out, NAN), r(size_t(T) * out);
      matmul_wt(x.data(), w.data(), bp, y.data(), T, in, out);
      ref::matmul_wt(x.data(), w.data(), bp, r.data(), T, in, out);
      double m = 0;
      for (size_t i = 0; i < y.size(); ++i) m = std::max(m, std::fabs(double(y[i]) - r[i]));
      EXPECT_LT(m, 1e-4) << "T " << T;
    }
  }
}

// Jobs back to back (workers spinning) and jobs after pauses longer than the spin window
// (workers asleep): none is lost, every piece runs once, with spinning on and off.
TEST(ThreadPool, SpinningAndSleepingWorkersTakeEveryJob) {
  for (const char* spin : {"0", "50", "200"}) {
    setenv("KAMERA_POOL_SPIN_US", spin, 1);
    ThreadPool pool(3);
    unsetenv("KAMERA_POOL_SPIN_US");
    EXPECT_EQ(pool.spin_us(), std::atoi(spin));
    std::atomic<int64_t> sum{0};
    int64_t want = 0;
    for (int job = 0; job < 3000; ++job) {
      if (job % 500 == 0) std::this_thread::sleep_for(std::chrono::microseconds(400));
      const int64_t n = 1 + job % 7;
      pool.parallel_for(n, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i) sum += i + 1;
      });
      want += n * (n + 1) / 2;
    }
    EXPECT_EQ(sum.load(), want) << "spin " << spin;
  }
}

// The pool's stats (bench decode's hand-offs per token) count the jobs that ran on several
// threads, their wall time and their tails: a job whose second piece sleeps 3 ms has a tail of at
// least that; a one-piece job runs on the caller and is not counted.
TEST(ThreadPool, StatsCountJobsAndTheirTails) {
  ThreadPool pool(2);
  pool.parallel_for(1, [](int64_t, int64_t) {});
  EXPECT_EQ(pool.stats().jobs, 0u);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i)
    pool.parallel_for(2, [](int64_t a, int64_t) {
      if (a == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    });
  const double wall =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const ThreadPool::Stats s = pool.stats();
  EXPECT_EQ(s.jobs, 3u);
  EXPECT_GE(s.tail_ms, 3 * 3.0 * 0.99);
  EXPECT_GE(s.job_ms, s.tail_ms);
  EXPECT_LE(s.job_ms, wall);
  pool.reset_stats();
  EXPECT_EQ(pool.stats().jobs, 0u);
  EXPECT_EQ(pool.stats().tail_ms, 0.0);
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 10, 1001}) {
    std::vector<int> hits(n, 0);
    std::vector<int> pieces_seen(3, 0);
    pool.parallel_pieces(n, [&](int64_t a, int64_t b, int piece) {
      pieces_seen[piece]++;
      for (int64_t i = a; i < b; ++i) hits[i]++;
    });
    for (int h : hits) EXPECT_EQ(h, 1);
    for (int p : pieces_seen) EXPECT_LE(p, 1);
  }
}
