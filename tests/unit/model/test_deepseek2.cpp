// DeepSeek-V2's mixture-of-experts FFN and YaRN: the engine against the naive reference
// (support/naive_moe.h) and against llama.cpp's logits (a committed fixture), the routing and the
// rope frequencies on their own, the GGUF layout and what the loader refuses. Chunk reuse on the
// MoE model runs in test_reuse.cpp (ReuseArch with "deepseek2:tiny-moe").
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "model/deepseek2.h"
#include "support/gguf_copy.h"
#include "support/naive_forward.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

const std::string kMoe = "deepseek2:tiny-moe";
using tiny::copy_gguf;
using tiny::prefill_all;

}  // namespace

// Prefill (every position) and decode (token by token) against the naive double-precision
// forward, on the tiny MoE + YaRN preset and variants: renormalized and scaled weights with two
// shared experts, no shared expert and top-1, MoE without YaRN.
TEST(Deepseek2Moe, ForwardMatchesNaive) {
  for (const std::string dims : {"", "moe_norm=1,moe_scale=2.5,shared_experts=2",
                                 "shared_experts=0,experts_used=1", "yarn=1,yarn_log_mul=0"}) {
    SCOPED_TRACE(dims);
    auto m = tiny::load(tiny::model_path(kMoe, DType::F32, dims));
    ASSERT_TRUE(m);
    ASSERT_TRUE(m->layers[1].moe.routed());
    ASSERT_FALSE(m->layers[0].moe.routed());  // the leading dense layer
    const int n = 30;
    auto ids = tiny::random_tokens(n, m->cfg.n_vocab, 11);
    auto got = prefill_all(*m, ids, 512);
    const auto want = naive::logits_from_zero(*m, ids);
    EXPECT_LT(tiny::max_abs_diff(got, want), 1e-4);
    auto pool = tiny::pool_for(*m, 64);
    Engine e(*m, 1);
    const SeqId s = pool->create_sequence();
    std::vector<float> last;
    for (int t = 0; t < n; ++t) {
      const Pos p = Pos::linear(t);
      auto r = e.forward(*pool, s, ForwardInput::from_tokens({&ids[t], 1}, {&p, 1}));
      ASSERT_TRUE(r.ok());
      last = *r;
    }
    EXPECT_LT(tiny::max_abs_diff(last, std::vector<float>(want.end() - m->cfg.n_vocab, want.end())),
              1e-4);
  }
}

// Rows grouped by expert: how the batch is cut into micro-batches does not change any row.
TEST(Deepseek2Moe, MicroBatchingDoesNotChangeRows) {
  auto m = tiny::load(tiny::model_path(kMoe));
  ASSERT_TRUE(m);
  auto ids = tiny::random_tokens(41, m->cfg.n_vocab, 12);
  const auto whole = prefill_all(*m, ids, 512);
  for (int mb : {1, 7, 16})
    EXPECT_LT(tiny::max_abs_diff(prefill_all(*m, ids, mb), whole), 1e-5) << "max_batch " << mb;
}

TEST(Deepseek2Moe, RoutingPicksTopKThenNormalizesAndScales) {
  MoeConfig c{6, 3, 0, 8, 0, false, 1.0f};
  const float p[6] = {0.10f, 0.30f, 0.05f, 0.25f, 0.25f, 0.05f};
  int32_t ids[3];
  float w[3];
  moe_route(c, p, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);  // a tie keeps the lower expert id first
  EXPECT_EQ(ids[2], 4);
  EXPECT_FLOAT_EQ(w[0], 0.30f);
  EXPECT_FLOAT_EQ(w[2], 0.25f);
  c.norm_weights = true;
  c.weights_scale = 2.0f;
  moe_route(c, p, ids, w);
  EXPECT_NEAR(w[0], 2.0 * 0.30 / 0.80, 1e-6);
  EXPECT_NEAR(w[0] + w[1] + w[2], 2.0, 1e-6);
}

// V2-Lite's YaRN (64 rotary dims, theta 1e4, factor 40, original context 4096): the correction
// range is pairs 10..23 (c(32) = 10.47, c(1) = 22.50); below it the trained frequency, above it
// the trained one / 40, a linear mix between, as the naive (Hugging Face) formula gives.
TEST(Yarn, FrequenciesFollowTheRamp) {
  const ModelConfig c = *synthetic_preset(Arch::Deepseek2, "lite");
  ASSERT_EQ(c.rope.n_rot, 64);
  for (int i = 0; i < 32; ++i) {
    const double trained = std::pow(10000.0, -2.0 * i / 64);
    const double f = c.rope.pair_freq(i);
    EXPECT_NEAR(f / naive::rope_freq(c.rope, i), 1.0, 1e-14) << i;
    if (i <= 10) {
      EXPECT_NEAR(f / trained, 1.0, 1e-14) << i;
    }
    if (i >= 23) {
      EXPECT_NEAR(f / trained, 1.0 / 40, 1e-14) << i;
    }
    if (i > 10 && i < 23) {
      EXPECT_TRUE(f < trained && f > trained / 40) << i;
    }
  }
  // without YaRN: the plain formula
  RopeDesc plain = c.rope;
  plain.yarn = {};
  plain.freq_scale = 1.0;
  EXPECT_DOUBLE_EQ(plain.pair_freq(5), std::pow(10000.0, -10.0 / 64));
}

// Still a rotation by position x frequency: rotate to a, relocate by b - a equals rotating to b,
// and the inverse rotation recovers the key, within f32 rounding.
TEST(Yarn, RelocationComposes) {
  const ModelConfig c = *synthetic_preset(Arch::Deepseek2, "lite");
  RopeCache rope(c.rope, 4096);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  double worst = 0;
  for (int rep = 0; rep < 100; ++rep) {
    std::vector<float> k(64);
    for (float& x : k) x = u(rng);
    const int a = int(rng() % 8000), b = int(rng() % 8000);
    std::vector<float> x = k, y = k;
    std::vector<float> ca(32), sa(32), cb(32), sb(32), cd(32), sd(32);
    rope.angles_1d(a, ca.data(), sa.data());
    rope.angles_1d(b - a, cd.data(), sd.data());
    rope.angles_1d(b, cb.data(), sb.data());
    rope_apply(c.rope, ca.data(), sa.data(), x.data(), 1);
    rope_apply(c.rope, cd.data(), sd.data(), x.data(), 1);
    rope_apply(c.rope, cb.data(), sb.data(), y.data(), 1);
    for (int i = 0; i < 64; ++i) worst = std::max(worst, double(std::fabs(x[i] - y[i])));
    rope_apply(c.rope, cb.data(), sb.data(), y.data(), 1, true);
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(y[i], k[i], 1e-6);
  }
  EXPECT_LT(worst, 2e-6);
}

TEST(Yarn, AttentionScaleIsMscaleSquared) {
  const ModelConfig lite = *synthetic_preset(Arch::Deepseek2, "lite");
  const double m = 1.0 + 0.0707 * std::log(40.0);
  EXPECT_NEAR(mla_kq_scale(lite) / (m * m / std::sqrt(192.0)), 1.0, 1e-6);
  const ModelConfig dense = *synthetic_preset(Arch::Deepseek2, "tiny");
  EXPECT_EQ(mla_kq_scale(dense), 1.0f / std::sqrt(float(dense.head_dim)));  // unchanged
}

// The file holds what the config says: MoE and YaRN keys read back, the weights counted by
// count_parameters, V2-Lite at its published 15.7 B.
TEST(Deepseek2Gguf, MoeFileRoundTrips) {
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(Arch::Deepseek2, "tiny-moe");
  ASSERT_TRUE(apply_dims(spec.cfg, "moe_norm=1,moe_scale=1.5").ok());
  const std::string path = unique_temp("kamera-moe-roundtrip.gguf");
  ASSERT_TRUE(write_synthetic_gguf(spec, path).ok());
  auto m = tiny::load(path);
  ASSERT_TRUE(m);
  const MoeConfig& a = m->cfg.moe;
  EXPECT_EQ(a.n_experts, 8);
  EXPECT_EQ(a.n_used, 2);
  EXPECT_EQ(a.n_shared, 1);
  EXPECT_EQ(a.expert_ffn, 32);
  EXPECT_EQ(a.n_dense_lead, 1);
  EXPECT_TRUE(a.norm_weights);
  EXPECT_FLOAT_EQ(a.weights_scale, 1.5f);
  EXPECT_DOUBLE_EQ(m->cfg.rope.yarn.ext_factor, 1.0);
  EXPECT_EQ(m->cfg.rope.yarn.orig_ctx, 256);
  EXPECT_DOUBLE_EQ(m->cfg.rope.freq_scale, 0.25);
  EXPECT_NEAR(m->cfg.yarn_log_mul, 0.0707, 1e-7);
  auto n = [](const Weight& w) { return w.rows() * w.cols(); };
  int64_t held = n(m->tok_embd) + int64_t(m->out_norm.size()) + n(m->output);
  for (const LayerWeights& l : m->layers) {
    for (const auto* v : {&l.attn_norm, &l.ffn_norm, &l.q_a_norm, &l.kv_a_norm})
      held += int64_t(v->size());
    for (const Weight* w :
         {&l.wq, &l.wo, &l.w_gate, &l.w_down, &l.w_up, &l.wq_a, &l.wq_b, &l.wkv_a, &l.wkv_b})
      held += n(*w);
    l.moe.for_each([&](const char*, const Weight& w) { held += n(w); });
  }
  EXPECT_EQ(held, count_parameters(m->cfg));
  const int64_t lite = count_parameters(*synthetic_preset(Arch::Deepseek2, "lite"));
  EXPECT_GT(lite, int64_t(15.6e9));
  EXPECT_LT(lite, int64_t(15.8e9));
  // another MoE setting is another model
  SyntheticSpec other = spec;
  other.cfg.moe.weights_scale = 1.25f;
  const std::string path2 = unique_temp("kamera-moe-roundtrip2.gguf");
  ASSERT_TRUE(write_synthetic_gguf(other, path2).ok());
  auto m2 = tiny::load(path2);
  ASSERT_TRUE(m2);
  EXPECT_NE(m->fingerprint, m2->fingerprint);
}

TEST(Deepseek2Gguf, RefusesWhatItDoesNotRun) {
  const std::string src = tiny::model_path(kMoe);
  const std::string dst = unique_temp("kamera-moe-refused.gguf");
  struct Case {
    const char* what;
    std::function<void(GgufWriter&)> set;
    std::vector<std::pair<std::string, std::vector<int64_t>>> extra;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"sigmoid",
       [](GgufWriter& w) { w.set_u32("deepseek2.expert_gating_func", 2); },
       {},
       "sigmoid"},
      {"group routing",
       [](GgufWriter& w) { w.set_u32("deepseek2.expert_group_count", 4); },
       {},
       "group-limited"},
      {"selection bias", [](GgufWriter&) {}, {{"blk.1.exp_probs_b.bias", {8}}}, "exp_probs_b"},
      {"linear scaling",
       [](GgufWriter& w) { w.set_string("deepseek2.rope.scaling.type", "linear"); },
       {},
       "linear rope scaling"},
      {"shared width",
       [](GgufWriter& w) { w.set_u32("deepseek2.expert_shared_feed_forward_length", 48); },
       {},
       "expert_shared_feed_forward_length"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    copy_gguf(src, dst, c.set, c.extra);
    auto m = load_model(dst);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.code(), ErrorCode::Unsupported) << m.message();
    EXPECT_NE(m.message().find(c.expect), std::string::npos) << m.message();
  }
  copy_gguf(src, dst, [](GgufWriter&) {});  // the unchanged copy loads
  EXPECT_TRUE(load_model(dst).ok());
}

// llama.cpp (c392e50, CPU, f32 KV, one batch) loaded the tiny MoE + YaRN files and its logits at
// every position are committed (tests/data/deepseek2/README.md says how they were made). The
// files are regenerated here from their make-model arguments; their bytes must hash as they did.
TEST(Deepseek2Gguf, LogitsMatchLlamaCpp) {
  const std::string dir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/deepseek2/";
  const auto manifest = tiny::llama_cpp_manifest(dir);
  ASSERT_EQ(manifest["cases"].size(), 2u);
  for (const auto& c : manifest["cases"]) {
    SCOPED_TRACE(c["dims"].get<std::string>());
    // what `kamera make-model --arch deepseek2 --preset tiny-moe --seed S --dims D` writes
    SyntheticSpec spec;
    spec.cfg = *synthetic_preset(Arch::Deepseek2, "tiny-moe");
    ASSERT_TRUE(apply_dims(spec.cfg, c["dims"].get<std::string>()).ok());
    spec.seed = c["seed"];
    spec.name = fmt::format("kamera-synthetic-deepseek2-tiny-moe-seed{}", spec.seed);
    tiny::check_llama_cpp_case(spec, c, dir);
  }
}
