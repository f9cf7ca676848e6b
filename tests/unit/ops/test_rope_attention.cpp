// RoPE against its reference and its composition properties; paged attention against the
// scalar reference, with arbitrary slots, positions and masks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "core/thread_pool.h"
#include "kv/kv_row.h"
#include "ops/attention.h"
#include "ops/attention_split.h"
#include "ops/reference.h"
#include "ops/rope.h"

using namespace kamera;

namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

RopeDesc desc(RopeLayout layout, int head_dim, int n_rot, double theta = 10000.0) {
  RopeDesc d;
  d.layout = layout;
  d.head_dim = head_dim;
  d.n_rot = n_rot;
  d.theta = theta;
  return d;
}

void rotate(const RopeCache& c, float* x, int heads, int64_t pos, bool inverse = false) {
  std::vector<float> cs(c.desc().n_pairs()), sn(c.desc().n_pairs());
  c.angles_1d(pos, cs.data(), sn.data());
  rope_apply(c.desc(), cs.data(), sn.data(), x, heads, inverse);
}

}  // namespace

TEST(Rope, FastMatchesReferenceAllLayouts) {
  for (auto layout : {RopeLayout::Normal, RopeLayout::Neox})
    for (int n_rot : {64, 32, 16}) {  // full and partial rotary
      const RopeDesc d = desc(layout, 64, n_rot, 1e6);
      RopeCache cache(d, 2048);
      for (int64_t pos : {0, 1, 17, 2047, 2048, 100000, -5}) {  // in and outside the table
        auto x = randn(3 * 64, uint32_t(pos + 10)), y = x;
        rotate(cache, x.data(), 3, pos);
        rope_apply_reference(d, pos, y.data(), 3, false);
        // Same angles bit for bit; the fast path may fuse multiply-adds (FMA), so the rotated
        // values agree within one rounding of the pair's magnitude.
        for (size_t i = 0; i < x.size(); ++i) {
          const float scale = std::max(std::fabs(x[i]), 1.0f);
          ASSERT_NEAR(x[i], y[i], 2.4e-7f * 4 * scale) << "pos " << pos << " i " << i;
        }
      }
    }
}

TEST(Rope, PartialRotaryLeavesTailUntouched) {
  const RopeDesc d = desc(RopeLayout::Neox, 64, 16);
  RopeCache cache(d, 128);
  auto x = randn(64, 3), y = x;
  rotate(cache, x.data(), 1, 77);
  for (int i = 16; i < 64; ++i) EXPECT_EQ(x[i], y[i]);
  bool moved = false;
  for (int i = 0; i < 16; ++i) moved |= x[i] != y[i];
  EXPECT_TRUE(moved);
}

TEST(Rope, InverseUndoesRotation) {
  const RopeDesc d = desc(RopeLayout::Normal, 32, 32);
  RopeCache cache(d, 4096);
  auto x = randn(4 * 32, 4), y = x;
  rotate(cache, x.data(), 4, 3000);
  rotate(cache, x.data(), 4, 3000, /*inverse=*/true);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 4e-7 * (1 + std::fabs(y[i])));
}

// R(b - a) R(a) x == R(b) x within f32 rounding (a few ULP of the vector's scale).
TEST(Rope, RelocationComposesWithinRounding) {
  for (auto layout : {RopeLayout::Normal, RopeLayout::Neox}) {
    const RopeDesc d = desc(layout, 64, 64);
    RopeCache cache(d, 8192);
    std::mt19937 rng(5);
    double worst = 0;
    for (int trial = 0; trial < 200; ++trial) {
      const int64_t a = rng() % 8000, b = rng() % 8000;
      auto x = randn(64, 100 + trial), direct = x;
      rotate(cache, x.data(), 1, a);
      rotate(cache, x.data(), 1, b - a);
      rotate(cache, direct.data(), 1, b);
      double scale = 0;
      for (float v : direct) scale = std::max(scale, double(std::fabs(v)));
      for (int i = 0; i < 64; ++i)
        worst = std::max(worst, std::fabs(double(x[i]) - direct[i]) / scale);
    }
    EXPECT_LT(worst, 8 * 1.19e-7) << "relocation differs from direct rotation beyond f32 rounding";
    std::printf("  %s: max |R(b-a)R(a)x - R(b)x| / max|R(b)x| = %.3g (f32 eps 1.19e-7)\n",
                layout == RopeLayout::Normal ? "normal" : "neox", worst);
  }
}

// 1,000 successive relocations do not drift beyond 1e-5 relative.
TEST(Rope, ThousandRelocationsDoNotDrift) {
  const RopeDesc d = desc(RopeLayout::Normal, 64, 64);
  RopeCache cache(d, 1 << 16);
  std::mt19937 rng(6);
  auto x = randn(2 * 64, 7), direct = x;
  int64_t pos = 0;
  for (int step = 0; step < 1000; ++step) {
    const int64_t delta = int64_t(rng() % 200) - 90;  // forward and backward moves
    rotate(cache, x.data(), 2, delta);
    pos += delta;
  }
  rotate(cache, direct.data(), 2, pos);
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num = std::max(num, std::fabs(double(x[i]) - direct[i]));
    den = std::max(den, std::fabs(double(direct[i])));
  }
  EXPECT_LT(num / den, 1e-5);
  std::printf("  1000 relocations: max abs drift / max |x| = %.3g\n", num / den);
  // and the norm is preserved
  double n0 = 0, n1 = 0;
  for (size_t i = 0; i < x.size(); ++i)
    n0 += double(x[i]) * x[i], n1 += double(direct[i]) * direct[i];
  EXPECT_NEAR(n0 / n1, 1.0, 1e-5);
}

namespace {

struct MaskCtx {
  const AttentionMask* mask;
};
bool mask_blocked(int t, int j, const void* ctx) {
  return static_cast<const MaskCtx*>(ctx)->mask->hidden(t, j);
}

// Builds a pool-like arena with shuffled slots and arbitrary positions, then compares
// attention_paged with the scalar reference fed the same keys rotated by rope_apply_reference.
// dt: the arenas' storage (bf16/f16 rows are rounded once; the reference reads the same values).
// Returns the kernel's output.
std::vector<float> check_attention(int T, int first, int heads, int kv_heads, int hd,
                                   RopeLayout layout, const AttentionMask* mask, uint32_t seed,
                                   DType dt = DType::F32, int threads = 2, double rel_tol = 1.0) {
  const int N = first + T, kvw = kv_heads * hd;
  std::mt19937 rng(seed);
  std::vector<int32_t> slots(N);
  for (int j = 0; j < N; ++j) slots[j] = j;
  std::shuffle(slots.begin(), slots.end(), rng);
  for (auto& s : slots) s = s * 2 + 1;  // sparse: arena rows in between stay unused
  std::vector<Pos> pos(N);
  for (int j = 0; j < N; ++j) pos[j] = Pos::linear(int32_t(rng() % 5000));
  const int rows = 2 * N + 2;
  auto k_arena = randn(size_t(rows) * kvw, seed + 1), v_arena = randn(size_t(rows) * kvw, seed + 2);
  auto q = randn(size_t(T) * heads * hd, seed + 3);
  const RopeDesc d = desc(layout, hd, hd);
  RopeCache cache(d, 4096);
  ThreadPool pool(threads);
  AttentionWorkspace ws;
  std::vector<float> out(size_t(T) * heads * hd);
  std::vector<uint8_t> k_store(k_arena.size() * kv_elem_bytes(dt)), v_store(k_store.size());
  kv_store_row(dt, k_arena.data(), k_store.data(), int64_t(k_arena.size()));
  kv_store_row(dt, v_arena.data(), v_store.data(), int64_t(v_arena.size()));
  kv_load_row(dt, k_store.data(), k_arena.data(), int64_t(k_arena.size()));  // the stored values
  kv_load_row(dt, v_store.data(), v_arena.data(), int64_t(v_arena.size()));
  AttentionExtras ex;
  ex.kv_dtype = dt;
  attention_paged({heads, kv_heads, hd}, q.data(), T, first, k_store.data(), v_store.data(), slots,
                  pos, cache, mask, out.data(), pool, ws, ex);
  // Reference inputs: contiguous, rotated keys.
  std::vector<float> k(size_t(N) * kvw), v(size_t(N) * kvw);
  for (int j = 0; j < N; ++j) {
    std::copy_n(&k_arena[size_t(slots[j]) * kvw], kvw, &k[size_t(j) * kvw]);
    std::copy_n(&v_arena[size_t(slots[j]) * kvw], kvw, &v[size_t(j) * kvw]);
    rope_apply_reference(d, pos[j].t, &k[size_t(j) * kvw], kv_heads, false);
  }
  std::vector<float> want(out.size());
  MaskCtx ctx{mask};
  ref::attention(q.data(), k.data(), v.data(), want.data(), T, N, first, heads, kv_heads, hd,
                 mask ? mask_blocked : nullptr, &ctx);
  double m = 0, w = 0;
  for (size_t i = 0; i < out.size(); ++i) m = std::max(m, std::fabs(double(out[i]) - want[i]));
  for (float x : want) w = std::max(w, double(std::fabs(x)));
  EXPECT_LT(m, rel_tol * w) << "relative to the largest output " << w;
  EXPECT_LT(m, 2e-5) << "T " << T << " first " << first << " heads " << heads << "/" << kv_heads
                     << " " << dtype_name(dt);
  return out;
}

}  // namespace

TEST(Attention, DecodePathMatchesReference) {
  check_attention(1, 0, 4, 4, 16, RopeLayout::Normal, nullptr, 1);
  check_attention(1, 37, 8, 2, 16, RopeLayout::Normal, nullptr, 2);
  check_attention(3, 20, 6, 3, 8, RopeLayout::Neox, nullptr, 3);
}

TEST(Attention, GemmPathMatchesReference) {
  check_attention(64, 0, 4, 2, 16, RopeLayout::Normal, nullptr, 4);
  check_attention(300, 45, 14, 2, 32, RopeLayout::Neox, nullptr, 5);  // two query blocks
}

TEST(Attention, MaskHidesKeysExactly) {
  AttentionMask mask;
  mask.blocks.push_back({0, 20, 3, 11});  // queries 0..19 may not see keys 3..10
  mask.blocks.push_back({5, 6, 0, 100});  // query 5 sees nothing at all
  check_attention(20, 12, 4, 2, 16, RopeLayout::Normal, &mask, 6);
  check_attention(5, 12, 4, 2, 16, RopeLayout::Normal, &mask, 7);
}

// Decode at depth: few queries over at least kSplitMinKeys keys take the split path
// (ops/attention_split.h); the cases straddle its threshold and end mid-block, with GQA, MQA and
// MHA, f32 and bf16 rows, one query and several (each its own causal cut inside the blocks).
TEST(Attention, SplitDecodeMatchesReference) {
  struct Case {
    int T, first, heads, kv_heads, hd;
    RopeLayout layout;
    DType dt;
  };
  const Case cases[] = {
      {1, kSplitMinKeys - 2, 14, 2, 64, RopeLayout::Neox, DType::F32},  // per-head path
      {1, kSplitMinKeys - 1, 14, 2, 64, RopeLayout::Neox, DType::F32},  // split, 4 full blocks
      {1, 1500, 14, 2, 64, RopeLayout::Neox, DType::BF16},              // GQA, a partial block
      {1, 2100, 8, 8, 32, RopeLayout::Normal, DType::F32},              // MHA
      {1, 1300, 4, 1, 64, RopeLayout::Normal, DType::BF16},             // MQA
      {3, 1200, 6, 2, 16, RopeLayout::Neox, DType::F32},                // causal cut inside a block
      {7, 1100, 4, 2, 64, RopeLayout::Normal, DType::BF16},  // the most queries of decode
      {2, 1150, 4, 2, 18, RopeLayout::Neox, DType::F16},     // head_dim not a multiple of 4
  };
  uint32_t seed = 40;
  for (const Case& c : cases)
    check_attention(c.T, c.first, c.heads, c.kv_heads, c.hd, c.layout, nullptr, ++seed, c.dt, 2,
                    2e-6);
}

// The split's blocks do not depend on the pool: one thread and two give the same bits.
TEST(Attention, SplitDecodeSameBitsOnAnyPool) {
  const auto one =
      check_attention(2, 1500, 14, 2, 64, RopeLayout::Neox, nullptr, 9, DType::BF16, 1);
  const auto two =
      check_attention(2, 1500, 14, 2, 64, RopeLayout::Neox, nullptr, 9, DType::BF16, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

// gpt-oss's sinks on the split path: a sink s joins only the softmax's denominator, so each head's
// output is the sinkless output times Z / (Z + e^s), Z = sum_j e^(q.k_j / sqrt(hd)) (double, from
// keys the scalar reference rotated).
TEST(Attention, SplitDecodeSinkJoinsTheDenominator) {
  const int heads = 4, kv_heads = 2, hd = 16, kvw = kv_heads * hd, N = 1500;
  const auto k = randn(size_t(N) * kvw, 11), v = randn(size_t(N) * kvw, 12);
  const auto q = randn(size_t(heads) * hd, 13);
  std::vector<int32_t> slots(N);
  std::vector<Pos> pos(N);
  for (int j = 0; j < N; ++j) slots[j] = j, pos[j] = Pos::linear(j);
  const RopeDesc d = desc(RopeLayout::Neox, hd, hd);
  RopeCache cache(d, 4096);
  ThreadPool pool(2);
  AttentionWorkspace ws;
  const float sinks[heads] = {0.5f, -1.0f, 2.0f, 30.0f};
  auto run = [&](const float* s) {
    std::vector<float> out(size_t(heads) * hd);
    AttentionExtras ex;
    ex.sinks = s;
    attention_paged({heads, kv_heads, hd}, q.data(), 1, N - 1, k.data(), v.data(), slots, pos,
                    cache, nullptr, out.data(), pool, ws, ex);
    return out;
  };
  const auto plain = run(nullptr), sunk = run(sinks);
  std::vector<float> rk(k);
  for (int j = 0; j < N; ++j) rope_apply_reference(d, j, &rk[size_t(j) * kvw], kv_heads, false);
  for (int h = 0; h < heads; ++h) {
    double z = 0;
    for (int j = 0; j < N; ++j) {
      double dot = 0;
      for (int i = 0; i < hd; ++i)
        dot += double(q[size_t(h) * hd + i]) * rk[size_t(j) * kvw + size_t(h / 2) * hd + i];
      z += std::exp(dot / std::sqrt(double(hd)));
    }
    const double f = z / (z + std::exp(double(sinks[h])));
    for (int i = 0; i < hd; ++i)
      EXPECT_NEAR(sunk[size_t(h) * hd + i], plain[size_t(h) * hd + i] * f, 2e-6) << "head " << h;
  }
}

// A query's result does not depend on its batch (a speculative check runs the draft as one batch
// and must equal one-token decoding bit for bit): a batch across the split's threshold gives each
// query the bits it gets alone, on whichever path its own depth takes.
TEST(Attention, BatchAcrossSplitThresholdSameBitsAsAlone) {
  const int heads = 14, kv_heads = 2, hd = 64, kvw = kv_heads * hd, T = 5;
  const int first = kSplitMinKeys - 3, N = first + T;  // queries read 1022 .. 1026 keys
  const auto k = randn(size_t(N) * kvw, 21), v = randn(size_t(N) * kvw, 22);
  const auto q = randn(size_t(T) * heads * hd, 23);
  std::vector<int32_t> slots(N);
  std::vector<Pos> pos(N);
  for (int j = 0; j < N; ++j) slots[j] = N - 1 - j, pos[j] = Pos::linear(j);
  RopeCache cache(desc(RopeLayout::Neox, hd, hd), 4096);
  ThreadPool pool(2);
  AttentionWorkspace ws;
  const size_t qw = size_t(heads) * hd;
  std::vector<float> batch(T * qw), alone(T * qw);
  attention_paged({heads, kv_heads, hd}, q.data(), T, first, k.data(), v.data(), slots, pos, cache,
                  nullptr, batch.data(), pool, ws);
  for (int t = 0; t < T; ++t)
    attention_paged({heads, kv_heads, hd}, q.data() + t * qw, 1, first + t, k.data(), v.data(),
                    std::span<const int32_t>(slots).first(first + t + 1), pos, cache, nullptr,
                    alone.data() + t * qw, pool, ws);
  for (int t = 0; t < T; ++t)
    EXPECT_EQ(std::memcmp(batch.data() + t * qw, alone.data() + t * qw, qw * sizeof(float)), 0)
        << "query " << t << " reads " << first + t + 1 << " keys";
}
