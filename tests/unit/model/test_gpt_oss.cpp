// gpt-oss (model/gpt_oss.h): a file written by llama.cpp's own gguf-py as its converter writes
// gpt-oss-20b (MXFP4 experts with biases, attention sinks, q/k/v/o biases, SWA/full alternation,
// YaRN; tests/data/gpt_oss/README.md) against llama.cpp's logits, and what reuse needs of the
// shape: keys relocate exactly at layer 0 on both layer kinds, and the sinks are position-free.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "cache/chunk_cache.h"
#include "model/gpt_oss.h"
#include "model/moe.h"
#include "ops/attention.h"
#include "ops/kernels.h"
#include "reuse/relocate.h"
#include "support/gguf_copy.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/gpt_oss/";

nlohmann::json manifest() {
  std::ifstream mf(kDir + "llama_cpp_logits.json");
  EXPECT_TRUE(mf);
  return mf ? nlohmann::json::parse(mf) : nlohmann::json{};
}

std::vector<float> reference(const nlohmann::json& c, size_t n) {
  std::vector<float> v(n);
  std::ifstream f(kDir + c["logits"].get<std::string>(), std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * 4));
  EXPECT_TRUE(f) << "short logits file";
  return v;
}

double relative(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  return tiny::max_abs_diff(got, want) / scale;
}

int argmax_differences(const std::vector<float>& got, const std::vector<float>& want, size_t V) {
  int n = 0;
  for (size_t t = 0; t < want.size() / V && got.size() == want.size(); ++t) {
    const auto g = got.begin() + std::ptrdiff_t(t * V), w = want.begin() + std::ptrdiff_t(t * V);
    n += std::max_element(g, g + std::ptrdiff_t(V)) - g !=
         std::max_element(w, w + std::ptrdiff_t(V)) - w;
  }
  return n;
}

}  // namespace

// What the converter writes loads as gpt-oss: even layers sliding-window (4), odd ones full, both
// with YaRN (factor 32 over 4096), sinks and biases read, the experts kept in MXFP4.
TEST(GptOssGguf, LoaderReadsWhatTheConverterWrites) {
  auto m = tiny::load(kDir + "gpt_oss_tiny.gguf");
  ASSERT_TRUE(m);
  const ModelConfig& c = m->cfg;
  EXPECT_EQ(c.arch, Arch::GptOss);
  EXPECT_EQ(c.rope.layout, RopeLayout::Neox);
  EXPECT_EQ(c.layer_kinds.window, 4);
  EXPECT_TRUE(c.layer_kinds.local_scaled);
  for (int i = 0; i < c.n_layers; ++i)
    EXPECT_EQ(c.layer_kinds.at(i), i % 2 == 0 ? LayerKind::Local : LayerKind::Global) << i;
  EXPECT_EQ(c.rope.yarn.ext_factor, 1.0);
  EXPECT_EQ(c.rope.yarn.orig_ctx, 4096);
  EXPECT_DOUBLE_EQ(c.rope.freq_scale, 1.0 / 32);
  const float mscale = 1.0f + 0.1f * std::log(32.0f);
  EXPECT_FLOAT_EQ(c.attn_scale, mscale * mscale / std::sqrt(32.0f));
  EXPECT_EQ(c.moe.gating, MoeGating::SoftmaxWeight);
  EXPECT_TRUE(c.moe.oai_experts);
  EXPECT_FALSE(c.tied_output);
  const LayerWeights& L = m->layers[1];
  EXPECT_EQ(L.attn_sinks.size(), 4u);
  EXPECT_EQ(L.bo.size(), 64u);
  EXPECT_EQ(L.moe.gate_b.size(), 4u * 64);
  EXPECT_EQ(L.moe.down_b.size(), 4u * 64);
  EXPECT_EQ(L.moe.gate_exps.type(), GgmlType::MXFP4);
  EXPECT_EQ(L.moe.down_exps.type(), GgmlType::MXFP4);
  const auto f = model_features(c);
  auto has = [&f](const std::string& s) {
    return std::any_of(f.begin(), f.end(), [&](const std::string& x) { return x.starts_with(s); });
  };
  EXPECT_TRUE(has("attention_sinks"));
  EXPECT_TRUE(has("swa_alternation (sliding window 4"));
  EXPECT_TRUE(has("sliding_window (4 positions on layers 0, 2"));
  EXPECT_TRUE(has("oai_experts (router and expert biases, top 2 of 4"));
  EXPECT_TRUE(has("yarn"));
}

// llama.cpp's CPU rounds the activations of every product with an MXFP4 matrix to q8_0 blocks
// (ggml's vec_dot_type of MXFP4), whatever the batch; kamera does the same on its decode path and,
// in prefill, rounds each activation row as decode does before the panels (ops/quant.h). Token by
// token kamera's logits are within 1e-4 of the largest |logit| of llama.cpp's (f32 KV, flash
// attention off) at every position, and as one batch too (release: 2.2e-7 and 3.2e-7; ASan:
// 2.6e-7 and 3.2e-7): RMS norm, softmax and the decode attention's value sums are written in
// ggml's order, not left to the compiler's vectorizer, so the ASan build no longer rounds an
// activation near a q8_0 tie the other way (its batch was 2.3e-3 off). Argmax equal everywhere.
TEST(GptOssGguf, LogitsMatchLlamaCpp) {
  const auto c = manifest();
  const std::string path = kDir + c["file"].get<std::string>();
  EXPECT_EQ(tiny::file_xxh3(path), c["xxh3_64"].get<std::string>()) << path << " changed";
  auto m = tiny::load(path);
  ASSERT_TRUE(m);
  const auto ids = c["tokens"].get<std::vector<int32_t>>();
  const size_t V = size_t(m->cfg.n_vocab);
  const auto want = reference(c, ids.size() * V);
  for (const auto& [batch, bound] : {std::pair{1, 1e-4}, std::pair{512, 1e-4}}) {
    const auto got = tiny::prefill_all(*m, ids, batch);
    const double rel = relative(got, want);
    const int arg = argmax_differences(got, want, V);
    std::printf(
        "gpt-oss (max_batch %d): max |kamera - llama.cpp| / max |logit| = %.3g, argmax "
        "differs at %d of %zu\n",
        batch, rel, arg, ids.size());
    EXPECT_LT(rel, bound) << "max_batch " << batch;
    EXPECT_EQ(arg, 0);
  }
}

// Keys are cached before the rotation and the YaRN magnitude is in the score scale, so a chunk's
// canonical keys relocated to position p are its keys prefilled at p: bit for bit at layer 0
// (both a sliding-window and, through layer 1's input, a full layer follow within rounding).
// Sinks carry no position: a chunk's logits after a shift of every position are unchanged
// within rounding (only differences of positions enter the scores).
TEST(GptOssReuse, RelocationIsExactAtLayerZeroAndSinksArePositionFree) {
  auto ctx = tiny::context(kDir + "gpt_oss_tiny.gguf", 400);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  ChunkCache& cache = ctx->cache();
  KvPool& pool = ctx->pool();
  const auto B = tiny::random_chunk(12, m.cfg.n_vocab, 3);
  auto canon = cache.canonical(B);
  ASSERT_TRUE(canon.ok()) << canon.message();
  const int w = pool.layout().channels[channel::kGqaKey].width, heads = m.cfg.n_kv_heads;
  std::vector<std::vector<float>> logits;
  for (int32_t p : {1, 57, 300}) {
    ScopedSequence s(pool);
    ASSERT_TRUE(cache.forward_chunk(s.id(), ChunkContent::from_tokens({1}), p - 1).ok());
    auto l = cache.forward_chunk(s.id(), B, p, LogitsMode::All);
    ASSERT_TRUE(l.ok());
    logits.push_back(*l);
    const auto pos = B.positions_at(p);
    for (int layer = 0; layer < 2; ++layer) {
      std::vector<float> x(size_t(B.n()) * w), y(x.size());
      for (int i = 0; i < B.n(); ++i) {
        (*canon)->kv.at(layer, channel::kGqaKey).get_row(i, &x[size_t(i) * w]);
        std::copy_n(static_cast<const KvPool&>(pool).row(s.id(), layer, channel::kGqaKey, i + 1), w,
                    &y[size_t(i) * w]);
      }
      relocate_rope_channel(ctx->engine().rope(), heads, x.data(), B.n(), w, pos);
      relocate_rope_channel(ctx->engine().rope(), heads, y.data(), B.n(), w, pos);
      if (layer == 0) {
        EXPECT_EQ(x, y) << "p " << p;
      } else {
        double err = 0, scale = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          err = std::max(err, double(std::fabs(x[i] - y[i])));
          scale = std::max(scale, double(std::fabs(y[i])));
        }
        EXPECT_LT(err / scale, 1e-5) << "layer 1 p " << p;
      }
    }
  }
  // The anchor token differs in position from the chunk by 1 everywhere: the same relative
  // positions, so the same logits whatever p (sinks included; an absolute-position term would
  // show here).
  for (size_t i = 1; i < logits.size(); ++i)
    EXPECT_LT(tiny::max_abs_diff(logits[i], logits[0]), 1e-4) << i;
}

// A sink joins the softmax's maximum and denominator and has no value: weights e^(s_j - m) /
// (sum_j e^(s_j - m) + e^(sink - m)), unscaled by the score scale; no sink is the plain softmax.
TEST(GptOssOps, SinkJoinsTheDenominatorOnly) {
  const float scale = 0.5f, sink = 1.3f;
  const std::vector<float> raw = {0.4f, -1.0f, 2.2f, 5.0f};
  for (const float s : {sink, 10.0f, -std::numeric_limits<float>::infinity()}) {
    std::vector<float> row = raw;
    finish_score_row(row.data(), 0, 4, 2, scale, nullptr, nullptr, s);  // key 3 is in the future
    double denom = std::isinf(s) ? 0.0 : std::exp(double(s));
    for (int j = 0; j < 3; ++j) denom += std::exp(double(raw[j]) * scale);
    for (int j = 0; j < 3; ++j)
      EXPECT_NEAR(row[j], std::exp(double(raw[j]) * scale) / denom, 1e-6) << "sink " << s;
    EXPECT_EQ(row[3], 0.0f);
  }
}

// ggml's swiglu_oai: g = min(gate, 7), g sigmoid(1.702 g) (clamp(up, -7, 7) + 1).
TEST(GptOssOps, ClampedSwigluMatchesItsDefinition) {
  std::vector<float> gate = {-9.0f, -1.0f, 0.0f, 0.5f, 6.9f, 7.0f, 12.0f},
                     up = {-9.0f, 3.0f, 1.0f, -0.5f, 8.0f, -7.5f, 0.25f};
  const auto g0 = gate;
  swiglu_oai_mul(gate.data(), up.data(), int64_t(gate.size()), kOaiSwigluAlpha, kOaiSwigluLimit);
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = std::min(double(g0[i]), 7.0), u = std::clamp(double(up[i]), -7.0, 7.0);
    EXPECT_NEAR(gate[i], g / (1 + std::exp(-1.702 * g)) * (u + 1), 1e-5 * (1 + std::fabs(gate[i])))
        << i;
  }
}

// SoftmaxWeight routing: the n_used largest raw logits choose (descending), their softmax weighs.
TEST(GptOssOps, RouterSoftmaxesTheChosenLogitsOnly) {
  MoeConfig c;
  c.n_experts = 5;
  c.n_used = 2;
  c.expert_ffn = 32;
  c.gating = MoeGating::SoftmaxWeight;
  const float logits[5] = {0.1f, 2.0f, -3.0f, 1.5f, 1.9f};
  int32_t ids[2];
  float w[2];
  moe_route(c, logits, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 4);
  const double e = std::exp(1.9 - 2.0);
  EXPECT_NEAR(w[0], 1 / (1 + e), 1e-6);
  EXPECT_NEAR(w[1], e / (1 + e), 1e-6);
}
