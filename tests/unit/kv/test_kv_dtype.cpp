// The KV pool in f16 and bf16 (--kv-type): row conversions, pool round trips and memory,
// attention on half-width rows, relocation exactness, canonicals and the serialized store.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "api/handles.h"
#include "cache/chunk_cache.h"
#include "core/thread_pool.h"
#include "kamera.h"
#include "kv/kv_row.h"
#include "ops/attention.h"
#include "store/entry_codec.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

constexpr DType kHalfTypes[] = {DType::F16, DType::BF16};

// Unit roundoff of round-to-nearest: half the spacing of the dtype's significand (2^-11 for f16,
// 2^-8 for bf16, 2^-24 for f32).
double unit_roundoff(DType t) {
  return t == DType::F16    ? std::ldexp(1.0, -11)
         : t == DType::BF16 ? std::ldexp(1.0, -8)
                            : std::ldexp(1.0, -24);
}

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// The values stored as t and widened again (the scalar reference path).
std::vector<float> rounded(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> raw(x.size() * kv_elem_bytes(t));
  kv_store_row_scalar(t, x.data(), raw.data(), int64_t(x.size()));
  std::vector<float> y(x.size());
  kv_load_row_scalar(t, raw.data(), y.data(), int64_t(x.size()));
  return y;
}

std::unique_ptr<Context> context_of(const std::string& arch, DType kv) {
  ContextOptions o;
  o.kv_tokens = 2000;
  o.anchor = {1};
  o.kv_type = kv;
  auto c = Context::load(tiny::model_path(arch), o);
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? std::move(c.value()) : nullptr;
}

}  // namespace

// The vectorised conversions (F16C, AVX512-BF16 where the CPU has them) agree with the scalar
// ones bit for bit on normal values, zeros and ties; every length exercises the tails.
TEST(KvRow, VectorPathsMatchScalar) {
  for (DType t : kHalfTypes) {
    for (int n : {1, 7, 8, 15, 16, 17, 33, 100}) {
      auto x = randn(size_t(n), uint32_t(n), 30.0f);
      x[0] = 0.0f;
      if (n > 2) x[1] = 1.0f + float(std::ldexp(1.0, t == DType::F16 ? -11 : -8));  // a tie
      std::vector<uint16_t> a(n), b(n);
      kv_store_row(t, x.data(), a.data(), n);
      kv_store_row_scalar(t, x.data(), b.data(), n);
      EXPECT_EQ(a, b) << dtype_name(t) << " n " << n;
      std::vector<float> fa(n), fb(n);
      kv_load_row(t, a.data(), fa.data(), n);
      kv_load_row_scalar(t, a.data(), fb.data(), n);
      EXPECT_EQ(0, std::memcmp(fa.data(), fb.data(), sizeof(float) * n));
    }
  }
  EXPECT_FALSE(kv_dtype_from_name("q8_0").has_value());
  EXPECT_EQ(kv_dtype_from_name("bf16"), DType::BF16);
}

// Rows written into a pool of each dtype read back as the value rounded once (f32: exactly),
// within the dtype's unit roundoff, also after a copy-on-write fork copied their page.
TEST(KvPoolDtype, RoundTripPerDtype) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    KvPool::Params p;
    p.layout.n_layers = 2;
    p.layout.channels = {{"k", 24, true}, {"v", 40, false}};
    p.page_tokens = 4;
    p.n_pages = 8;
    p.dtype = t;
    auto pool = KvPool::create(p);
    ASSERT_TRUE(pool.ok()) << pool.message();
    KvPool& kv = **pool;
    EXPECT_EQ(kv.dtype(), t);
    const SeqId s = kv.create_sequence();
    ASSERT_TRUE(kv.append(s, tiny::linear_positions(6)).ok());
    std::vector<std::vector<float>> want;
    for (int l = 0; l < 2; ++l)
      for (int ch = 0; ch < 2; ++ch)
        for (int tok = 0; tok < 6; ++tok) {
          auto x = randn(size_t(p.layout.channels[ch].width), uint32_t(100 * l + 10 * ch + tok));
          kv.write_row(s, l, ch, tok, x.data());
          want.push_back(rounded(t, x));
          for (size_t i = 0; i < x.size(); ++i)
            ASSERT_LE(std::fabs(want.back()[i] - x[i]), unit_roundoff(t) * std::fabs(x[i]));
        }
    auto f = kv.fork(s);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(kv.make_writable(*f, 0, 6).ok());  // copies the shared pages
    for (SeqId seq : {s, *f}) {
      size_t k = 0;
      for (int l = 0; l < 2; ++l)
        for (int ch = 0; ch < 2; ++ch)
          for (int tok = 0; tok < 6; ++tok, ++k) {
            std::vector<float> got(want[k].size());
            kv.read_row(seq, l, ch, tok, got.data());
            ASSERT_EQ(0, std::memcmp(got.data(), want[k].data(), sizeof(float) * got.size()))
                << dtype_name(t) << " layer " << l << " channel " << ch << " token " << tok;
          }
    }
    ASSERT_TRUE(kv.check_invariants().ok());
  }
}

// The pool for N tokens takes half the bytes in f16 and bf16; a Context builds it at --kv-type.
TEST(KvPoolDtype, HalfWidthPoolIsHalfTheBytes) {
  KvPool::Params p;
  p.layout.n_layers = 3;
  p.layout.channels = {{"k", 64, true}, {"v", 64, false}};
  p.n_pages = 64;
  auto f32 = KvPool::create(p);
  ASSERT_TRUE(f32.ok());
  const size_t expected = size_t(64) * 16 * 3 * (64 + 64) * 4;
  EXPECT_EQ((*f32)->arena_bytes(), expected);
  for (DType t : kHalfTypes) {
    p.dtype = t;
    auto half = KvPool::create(p);
    ASSERT_TRUE(half.ok());
    EXPECT_EQ((*half)->arena_bytes() * 2, (*f32)->arena_bytes()) << dtype_name(t);
  }
  p.dtype = DType::Q8_0;
  auto bad = KvPool::create(p);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("not f32, f16 or bf16"), std::string::npos) << bad.message();
  auto ctx = context_of("llama", DType::BF16);
  ASSERT_TRUE(ctx);
  EXPECT_EQ(ctx->pool().dtype(), DType::BF16);
  auto ctx32 = context_of("llama", DType::F32);
  EXPECT_EQ(ctx->pool().arena_bytes() * 2, ctx32->pool().arena_bytes());
}

// Attention over half-width arenas equals attention over the same rows widened to f32 (the
// conversion on read is exact), bit for bit; and it stays within a bound derived from the dtype's
// unit roundoff u of attention over the unrounded f32 rows: keys off by u|k| move a scaled score
// by at most u |q| |k| / sqrt(hd), which moves the softmax weights by at most twice that in l1;
// values off by u|v|. So |d out| <= max|v| (u + 2 u max_j |q| |k_j| / sqrt(hd)) (+ f32 noise).
TEST(AttentionDtype, HalfWidthRowsWithinRoundoffBound) {
  const int heads = 4, kv_heads = 2, hd = 16, kvw = kv_heads * hd;
  for (int T : {1, 12}) {  // the decode path and the GEMM path
    const int first = 40, N = first + T;
    std::vector<int32_t> slots(N);
    for (int j = 0; j < N; ++j) slots[j] = (j * 7) % N;  // a permutation: scattered rows
    std::vector<Pos> pos(N);
    for (int j = 0; j < N; ++j) pos[j] = Pos::linear(3 * j + 5);
    const auto k = randn(size_t(N) * kvw, 1), v = randn(size_t(N) * kvw, 2);
    const auto q = randn(size_t(T) * heads * hd, 3);
    RopeDesc d;
    d.n_rot = hd;
    d.head_dim = hd;
    RopeCache rope(d, 4096);
    ThreadPool tp(2);
    AttentionWorkspace ws;
    auto run = [&](const void* ka, const void* va, DType t) {
      std::vector<float> out(size_t(T) * heads * hd);
      AttentionExtras ex;
      ex.kv_dtype = t;
      attention_paged({heads, kv_heads, hd}, q.data(), T, first, ka, va, slots, pos, rope, nullptr,
                      out.data(), tp, ws, ex);
      return out;
    };
    const auto exact = run(k.data(), v.data(), DType::F32);
    double qmax = 0, kmax = 0, vmax = 0;
    for (int i = 0; i < T * heads; ++i) {
      double s = 0;
      for (int j = 0; j < hd; ++j) s += double(q[size_t(i) * hd + j]) * q[size_t(i) * hd + j];
      qmax = std::max(qmax, std::sqrt(s));
    }
    for (int i = 0; i < N * kv_heads; ++i) {
      double s = 0;
      for (int j = 0; j < hd; ++j) s += double(k[size_t(i) * hd + j]) * k[size_t(i) * hd + j];
      kmax = std::max(kmax, std::sqrt(s));
    }
    for (float x : v) vmax = std::max(vmax, double(std::fabs(x)));
    for (DType t : kHalfTypes) {
      std::vector<uint16_t> kh(k.size()), vh(v.size());
      kv_store_row(t, k.data(), kh.data(), int64_t(k.size()));
      kv_store_row(t, v.data(), vh.data(), int64_t(v.size()));
      const auto half = run(kh.data(), vh.data(), t);
      const auto kw = rounded(t, k), vw = rounded(t, v);
      const auto widened = run(kw.data(), vw.data(), DType::F32);
      EXPECT_EQ(0, std::memcmp(half.data(), widened.data(), sizeof(float) * half.size()))
          << dtype_name(t) << " T " << T;
      const double u = unit_roundoff(t);
      const double bound = vmax * (u + 2 * u * qmax * kmax / std::sqrt(double(hd))) + 1e-5;
      const double err = tiny::max_abs_diff(half, exact);
      EXPECT_LE(err, bound) << dtype_name(t) << " T " << T;
      EXPECT_GT(err, 0.0) << "rounding the rows must be visible";
    }
  }
}

// Relocation stays exact in a half-width pool: the rope channel is stored pre-rotation, so moving
// a chunk changes only its position metadata and attention rotates the widened row in f32 at the
// new position. Moving by a then b equals moving by a + b bit for bit (bytes and the next
// logits), and the first layer's rows equal a fresh prefill's at the final position bit for bit
// (the same f32 projection rounded once).
TEST(RelocationDtype, ComposesExactlyAndMatchesFreshPrefill) {
  for (const std::string arch :
       {"llama", "deepseek2", "qwen3", "qwen3moe", "qwen3vl", "deepseek2:kimi-vl-tiny"}) {
    for (DType t : kHalfTypes) {
      auto ctx = context_of(arch, t);
      ASSERT_TRUE(ctx);
      KvPool& pool = ctx->pool();
      ChunkCache& cache = ctx->cache();
      const int V = ctx->model().cfg.n_vocab;
      const auto B = tiny::random_chunk(20, V, 3), Q = tiny::random_chunk(4, V, 4);
      ServeOptions blind;
      blind.policy = ServePolicy::Blind;
      const int32_t a = 37, b = 250;
      // s1: B served right behind the anchor, then moved by a, then by b (metadata only)
      ScopedSequence s1(pool), s2(pool), fresh(pool);
      ASSERT_TRUE(cache.assemble(s1.id(), std::vector<ChunkContent>{B}, blind).ok());
      const int first = int(cache.anchor().size());
      for (int32_t shift : {a, b})
        for (int i = 0; i < B.n(); ++i)
          pool.set_position(s1.id(), first + i, pool.positions(s1.id())[first + i].shifted(shift));
      // s2: B served at anchor + a + b in one move (a pad chunk's extent in between)
      ASSERT_TRUE(cache.assemble(s2.id(), std::vector<ChunkContent>{B}, blind).ok());
      for (int i = 0; i < B.n(); ++i)
        pool.set_position(s2.id(), first + i, pool.positions(s2.id())[first + i].shifted(a + b));
      // fresh: a prefill of B at the final positions
      ASSERT_TRUE(cache.forward_chunk(fresh.id(), ChunkContent::from_tokens({1}), 0).ok());
      ASSERT_TRUE(cache.forward_chunk(fresh.id(), B, first + a + b).ok());
      const KvLayout& lay = pool.layout();
      for (int l = 0; l < lay.n_layers; ++l)
        for (int ch = 0; ch < int(lay.channels.size()); ++ch) {
          const int w = lay.channels[ch].width;
          std::vector<float> r1(w), r2(w), r3(w);
          for (int i = 0; i < B.n(); ++i) {
            pool.read_row(s1.id(), l, ch, first + i, r1.data());
            pool.read_row(s2.id(), l, ch, first + i, r2.data());
            ASSERT_EQ(0, std::memcmp(r1.data(), r2.data(), sizeof(float) * w));
            ASSERT_EQ(pool.positions(s1.id())[first + i], pool.positions(s2.id())[first + i]);
            if (l > 0) continue;
            pool.read_row(fresh.id(), l, ch, first + i, r3.data());
            ASSERT_EQ(0, std::memcmp(r1.data(), r3.data(), sizeof(float) * w))
                << arch << " " << dtype_name(t) << " channel " << ch << " token " << i;
          }
        }
      const int32_t next = first + a + b + B.extent();
      auto l1 = cache.forward_chunk(s1.id(), Q, next, LogitsMode::All);
      auto l2 = cache.forward_chunk(s2.id(), Q, next, LogitsMode::All);
      ASSERT_TRUE(l1.ok() && l2.ok());
      EXPECT_EQ(*l1, *l2) << arch << " " << dtype_name(t);
    }
  }
}

// In a half-width pool the canonicals and the patch factors are stored at the pool's width (half
// the bytes of an f32 context's), serialize to about half the bytes and read back bit for bit.
// An entry of another dtype converts on placement: a bf16 canonical served into an f32 pool
// widens exactly, an f32 canonical served into a bf16 pool rounds once.
TEST(StoreDtype, CanonicalsAndPatchesFollowThePool) {
  auto c32 = context_of("llama", DType::F32);
  ASSERT_TRUE(c32);
  const int V = c32->model().cfg.n_vocab;
  const auto A = tiny::random_chunk(16, V, 5), B = tiny::random_chunk(24, V, 6);
  ServeOptions patch;
  patch.patch.rank = 4;
  auto e32 = c32->cache().canonical(B);
  ASSERT_TRUE(e32.ok());
  {
    ScopedSequence s(c32->pool());
    ASSERT_TRUE(c32->cache().assemble(s.id(), std::vector<ChunkContent>{A, B}, patch).ok());
  }
  const size_t patch32 = c32->store().stats().patch_bytes;
  const Fingerprint fp = c32->model().fingerprint;
  for (DType t : kHalfTypes) {
    auto ch = context_of("llama", t);
    ASSERT_TRUE(ch);
    auto e = ch->cache().canonical(B);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ((*e)->kv.blocks[0].dtype(), t);
    EXPECT_EQ((*e)->kv.bytes() * 2, (*e32)->kv.bytes());
    ScopedSequence s(ch->pool());
    ASSERT_TRUE(ch->cache().assemble(s.id(), std::vector<ChunkContent>{A, B}, patch).ok());
    const size_t patch_half = ch->store().stats().patch_bytes;
    EXPECT_LT(double(patch_half), 0.6 * double(patch32)) << dtype_name(t);
    // serialized: about half the bytes, read back bit for bit
    const std::string blob = serialize_canonical(**e, fp), blob32 = serialize_canonical(**e32, fp);
    EXPECT_LT(double(blob.size()), 0.55 * double(blob32.size()));
    auto back = deserialize_canonical(blob, fp);
    ASSERT_TRUE(back.ok()) << back.message();
    for (size_t i = 0; i < (*e)->kv.blocks.size(); ++i) {
      const ChannelMatrix &x = (*e)->kv.blocks[i], &y = (*back)->kv.blocks[i];
      ASSERT_EQ(y.dtype(), t);
      ASSERT_EQ(0, std::memcmp(x.raw(), y.raw(), x.bytes()));
    }
    // cross-dtype placement: half entry -> f32 pool (exact), f32 entry -> half pool (one rounding)
    ScopedSequence into32(c32->pool()), intohalf(ch->pool());
    ASSERT_TRUE(c32->pool().append(into32.id(), tiny::linear_positions(B.n())).ok());
    ASSERT_TRUE(ch->pool().append(intohalf.id(), tiny::linear_positions(B.n())).ok());
    write_chunk_kv((*back)->kv, c32->pool(), into32.id(), 0);
    write_chunk_kv((*e32)->kv, ch->pool(), intohalf.id(), 0);
    const KvLayout& lay = c32->pool().layout();
    for (int l = 0; l < lay.n_layers; ++l)
      for (int c = 0; c < int(lay.channels.size()); ++c) {
        const int w = lay.channels[c].width;
        std::vector<float> want(w), got(w), f32row(w);
        for (int i = 0; i < B.n(); ++i) {
          (*back)->kv.at(l, c).get_row(i, want.data());
          c32->pool().read_row(into32.id(), l, c, i, got.data());
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), sizeof(float) * w));
          (*e32)->kv.at(l, c).get_row(i, f32row.data());
          ch->pool().read_row(intohalf.id(), l, c, i, got.data());
          const auto r = rounded(t, f32row);
          ASSERT_EQ(0, std::memcmp(r.data(), got.data(), sizeof(float) * w));
        }
      }
  }
}

// The C API takes the KV dtype in kamera_context_params.kv_type and refuses unknown values.
TEST(CApiKvType, ContextParamsSelectThePoolDtype) {
  kamera_model* model = nullptr;
  ASSERT_EQ(kamera_model_load(tiny::model_path("llama").c_str(), nullptr, &model), KAMERA_OK)
      << kamera_last_error();
  kamera_context_params p = kamera_context_default_params();
  EXPECT_EQ(p.kv_type, KAMERA_DTYPE_F32);
  for (auto [t, want] : {std::pair{KAMERA_DTYPE_F16, DType::F16},
                         {KAMERA_DTYPE_BF16, DType::BF16},
                         {KAMERA_DTYPE_F32, DType::F32}}) {
    p.kv_type = t;
    kamera_context* ctx = nullptr;
    ASSERT_EQ(kamera_context_new(model, &p, &ctx), KAMERA_OK) << kamera_last_error();
    EXPECT_EQ(ctx->box->ctx->pool().dtype(), want);
    kamera_context_free(ctx);
  }
  p.kv_type = 7;
  kamera_context* bad = nullptr;
  EXPECT_EQ(kamera_context_new(model, &p, &bad), KAMERA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(std::string(kamera_last_error()).find("kv_type 7"), std::string::npos)
      << kamera_last_error();
  kamera_model_free(model);
}
