// DeepSeek-V2's mixture-of-experts FFN and YaRN, and DeepSeek-V3's routing (Kimi-VL's decoder:
// sigmoid scores, the selection bias, group-limited top-k, routed scaling): the engine against the
// naive reference (support/naive_moe.h) and against llama.cpp's logits (committed fixtures), the
// routing and the rope frequencies on their own, the GGUF layout and what the loader refuses.
// Chunk reuse on the MoE models runs in test_reuse.cpp (ReuseArch with "deepseek2:tiny-moe" and
// "deepseek2:kimi-vl-tiny").
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>
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
const std::string kKimi = "deepseek2:kimi-vl-tiny";
using tiny::copy_gguf;
using tiny::prefill_all;

}  // namespace

// Prefill (every position) and decode (token by token) against the naive double-precision
// forward, on the tiny MoE + YaRN preset and variants: renormalized and scaled weights with two
// shared experts, no shared expert and top-1, MoE without YaRN.
// Kimi-VL's routing (kimi-vl-tiny): sigmoid scores with the selection bias, normalized and scaled
// by 2.446; with 4 groups of 2 experts of which 2 are kept; without the bias; unnormalized.
TEST(Deepseek2Moe, ForwardMatchesNaive) {
  const std::pair<std::string, std::string> cases[] = {
      {kMoe, ""},
      {kMoe, "moe_norm=1,moe_scale=2.5,shared_experts=2"},
      {kMoe, "shared_experts=0,experts_used=1"},
      {kMoe, "yarn=1,yarn_log_mul=0"},
      {kKimi, ""},
      {kKimi, "groups=4,groups_used=2,experts_used=3"},
      {kKimi, "sel_bias=0"},
      {kKimi, "moe_norm=0,sigmoid=1"}};
  for (const auto& [preset, dims] : cases) {
    SCOPED_TRACE(preset + " " + dims);
    auto m = tiny::load(tiny::model_path(preset, DType::F32, dims));
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

// DeepSeek-V3's routing on one row: the bias changes which experts are chosen, never their
// weights; a group limit masks the experts of the groups whose two best scores sum lowest.
TEST(Deepseek2Moe, V3RoutingChoosesWithTheBiasAndWeighsWithout) {
  MoeConfig c{6, 2, 0, 8, 0, true, 2.0f};
  c.gating = MoeGating::Sigmoid;
  const float p[6] = {0.90f, 0.80f, 0.10f, 0.70f, 0.20f, 0.30f};
  const float bias[6] = {0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f};
  int32_t ids[2];
  float w[2];
  moe_route(c, p, ids, w, bias);
  EXPECT_EQ(ids[0], 2);  // 0.1 + 1.0 beats 0.9
  EXPECT_EQ(ids[1], 0);
  EXPECT_NEAR(w[0], 2.0 * 0.10 / 1.00, 1e-6);  // weighed by the unbiased scores
  EXPECT_NEAR(w[1], 2.0 * 0.90 / 1.00, 1e-6);
  moe_route(c, p, ids, w);  // no bias: the two largest scores
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  // 3 groups of 2: scores {0.9+0.8, 0.1+0.7, 0.2+0.3}; keep 1 group -> experts 0, 1 only
  c.n_groups = 3;
  c.n_groups_used = 1;
  moe_route(c, p, ids, w, bias);  // group 1 now scores 1.1 + 0.7 = 1.8 > 1.7
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 3);
  c.n_groups_used = 2;  // groups 1 and 0: 2.1 ... top 2 of {0.9, 0.8, 1.1, 0.7}
  moe_route(c, p, ids, w, bias);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 0);
  EXPECT_TRUE(validate_moe(c, 1, "t").ok());
  c.n_groups = 4;  // 6 experts do not split into 4 equal groups
  EXPECT_FALSE(validate_moe(c, 1, "t").ok());
  c.n_groups = 3;
  c.n_groups_used = 1;
  c.n_used = 3;  // one group of 2 cannot hold 3 experts
  EXPECT_FALSE(validate_moe(c, 1, "t").ok());
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
    std::string from;
    std::function<void(GgufWriter&)> set;
    std::vector<std::pair<std::string, std::vector<int64_t>>> extra;
    ErrorCode code;
    const char* expect;
  };
  const std::string kimi = tiny::model_path(kKimi);
  const std::vector<Case> cases = {
      {"sqrt-softplus",
       src,
       [](GgufWriter& w) { w.set_u32("deepseek2.expert_gating_func", 4); },
       {},
       ErrorCode::Unsupported,
       "sqrt-softplus"},
      {"unequal groups",
       src,
       [](GgufWriter& w) { w.set_u32("deepseek2.expert_group_count", 3); },
       {},
       ErrorCode::InvalidArgument,
       "groups must be equal"},
      {"bias in one layer only",
       src,
       [](GgufWriter&) {},
       {{"blk.2.exp_probs_b.bias", {8}}},
       ErrorCode::Unsupported,
       "exp_probs_b"},
      {"linear scaling",
       src,
       [](GgufWriter& w) { w.set_string("deepseek2.rope.scaling.type", "linear"); },
       {},
       ErrorCode::Unsupported,
       "linear rope scaling"},
      {"shared width",
       src,
       [](GgufWriter& w) { w.set_u32("deepseek2.expert_shared_feed_forward_length", 48); },
       {},
       ErrorCode::Unsupported,
       "expert_shared_feed_forward_length"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    copy_gguf(c.from, dst, c.set, c.extra);
    auto m = load_model(dst);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.code(), c.code) << m.message();
    EXPECT_NE(m.message().find(c.expect), std::string::npos) << m.message();
  }
  copy_gguf(src, dst, [](GgufWriter&) {});  // the unchanged copies load
  EXPECT_TRUE(load_model(dst).ok());
  copy_gguf(kimi, dst, [](GgufWriter&) {});
  auto k = load_model(dst);
  ASSERT_TRUE(k.ok()) << k.message();
  EXPECT_EQ((*k)->cfg.moe.gating, MoeGating::Sigmoid);
  EXPECT_TRUE((*k)->cfg.moe.selection_bias);
  EXPECT_EQ((*k)->layers[2].moe.exp_probs_b.size(), 8u);
  EXPECT_FLOAT_EQ((*k)->cfg.moe.weights_scale, 2.446f);
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
    // what `kamera make-model --arch deepseek2 --preset tiny-moe --seed S --dims D
    // --mla-layout kv_b` writes (the layout these fixtures were made in)
    SyntheticSpec spec;
    spec.cfg = *synthetic_preset(Arch::Deepseek2, "tiny-moe");
    spec.cfg.mla.file_layout = MlaFileLayout::KvB;
    ASSERT_TRUE(apply_dims(spec.cfg, c["dims"].get<std::string>()).ok());
    spec.seed = c["seed"];
    spec.name = fmt::format("kamera-synthetic-deepseek2-tiny-moe-seed{}", spec.seed);
    tiny::check_llama_cpp_case(spec, c, dir);
  }
}

// Kimi-VL's decoder (DeepSeek-V3 routing): llama.cpp d32676d loaded kimi-vl-tiny files (sigmoid
// scores with the selection bias, normalized and scaled by 2.446; one with 4 groups of 2 experts
// of which 2 are kept and 3 experts used) and its logits at every position are committed
// (tests/data/kimivl/README.md says how they were made).
TEST(Deepseek2Gguf, KimiLogitsMatchLlamaCpp) {
  const std::string dir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/kimivl/";
  const auto manifest = tiny::llama_cpp_manifest(dir);
  ASSERT_GE(manifest["cases"].size(), 2u);
  for (const auto& c : manifest["cases"]) {
    SCOPED_TRACE(c["dims"].get<std::string>());
    // what `kamera make-model --arch deepseek2 --preset kimi-vl-tiny --seed S --dims D
    // --mla-layout kv_b` writes (the layout these fixtures were made in)
    SyntheticSpec spec;
    spec.cfg = *synthetic_preset(Arch::Deepseek2, "kimi-vl-tiny");
    spec.cfg.mla.file_layout = MlaFileLayout::KvB;
    ASSERT_TRUE(apply_dims(spec.cfg, c["dims"].get<std::string>()).ok());
    spec.seed = c["seed"];
    spec.name = fmt::format("kamera-synthetic-deepseek2-kimi-vl-tiny-seed{}", spec.seed);
    tiny::check_llama_cpp_case(spec, c, dir);
  }
}

// kimi-vl-a3b is Kimi-VL-A3B's decoder as its config describes it: 16 B weights ("16B" on its
// model card), 27 layers of which 26 MoE, Kimi's routing; make-model --help lists the presets.
TEST(Deepseek2Gguf, KimiPresetHasTheReleasedShape) {
  const ModelConfig c = *synthetic_preset(Arch::Deepseek2, "kimi-vl-a3b");
  EXPECT_EQ(count_parameters(c), int64_t(15960110208));
  EXPECT_EQ(c.mla.q_lora_rank, 0);
  EXPECT_EQ(c.moe.n_experts, 64);
  EXPECT_EQ(c.moe.n_used, 6);
  EXPECT_EQ(c.moe.gating, MoeGating::Sigmoid);
  EXPECT_TRUE(c.moe.selection_bias);
  EXPECT_TRUE(llama_cpp_incompatibilities(c).empty());  // 27 layers: llama.cpp's no-q-lora path
  EXPECT_TRUE(c.validate("kimi-vl-a3b").ok());
}

namespace {

// The file of `preset` with seed 9 in `layout`, written by make-model's writer.
std::string mla_file(const std::string& preset, MlaFileLayout layout, const std::string& tag) {
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(Arch::Deepseek2, preset);
  spec.cfg.mla.file_layout = layout;
  spec.seed = 9;
  const std::string path = unique_temp("kamera-mla-" + preset + "-" + tag + ".gguf");
  EXPECT_TRUE(write_synthetic_gguf(spec, path).ok());
  return path;
}

}  // namespace

// llama.cpp's converter since its MLA rework writes one KV head of key_length kv_lora + qk_rope
// and value_length kv_lora, the per-head widths in key/value_length_mla, and kv_b split per head
// into attn_k_b (transposed) and attn_v_b. make-model writes that by default and the older
// attn_kv_b layout on request; the same weights in both layouts load to the same model: the same
// config, kv_b rows, fingerprint and logits, bit for bit.
TEST(Deepseek2Gguf, BothMlaLayoutsLoadTheSameModel) {
  for (const std::string preset : {"tiny", "tiny-moe", "kimi-vl-tiny"}) {
    SCOPED_TRACE(preset);
    const std::string split = mla_file(preset, MlaFileLayout::Split, "split");
    const std::string kv_b = mla_file(preset, MlaFileLayout::KvB, "kvb");
    auto f = GgufFile::open(split);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ((*f)->get_int("deepseek2.attention.head_count_kv"), 1);
    EXPECT_EQ((*f)->get_int("deepseek2.attention.key_length"), 32 + 8);
    EXPECT_EQ((*f)->get_int("deepseek2.attention.value_length"), 32);
    EXPECT_EQ((*f)->get_int("deepseek2.attention.key_length_mla"), 16 + 8);
    EXPECT_EQ((*f)->get_int("deepseek2.attention.value_length_mla"), 16);
    ASSERT_NE((*f)->find_tensor("blk.0.attn_k_b.weight"), nullptr);
    EXPECT_EQ((*f)->find_tensor("blk.0.attn_k_b.weight")->ne, (std::vector<int64_t>{16, 32, 4}));
    EXPECT_EQ((*f)->find_tensor("blk.0.attn_v_b.weight")->ne, (std::vector<int64_t>{32, 16, 4}));
    EXPECT_EQ((*f)->find_tensor("blk.0.attn_kv_b.weight"), nullptr);
    auto a = tiny::load(split), b = tiny::load(kv_b);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->cfg.mla.file_layout, MlaFileLayout::Split);
    EXPECT_EQ(b->cfg.mla.file_layout, MlaFileLayout::KvB);
    EXPECT_EQ(a->cfg.n_kv_heads, a->cfg.n_heads);
    EXPECT_EQ(a->cfg.head_dim, b->cfg.head_dim);
    EXPECT_EQ(a->cfg.mla.v_head_dim, b->cfg.mla.v_head_dim);
    EXPECT_EQ(a->cfg.mla.qk_nope_dim, b->cfg.mla.qk_nope_dim);
    for (int i = 0; i < a->cfg.n_layers; ++i) {
      const Weight &x = a->layers[i].wkv_b, &y = b->layers[i].wkv_b;
      ASSERT_EQ(x.bytes(), y.bytes());
      EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.bytes()), 0) << "layer " << i;
    }
    EXPECT_EQ(a->fingerprint, b->fingerprint);
    const auto ids = tiny::random_tokens(24, a->cfg.n_vocab, 4);
    EXPECT_EQ(tiny::max_abs_diff(prefill_all(*a, ids, 512), prefill_all(*b, ids, 512)), 0.0);
  }
}

// join_mla_kv_b undoes split_mla_kv_b, and k_b holds each head's W_kb transposed.
TEST(Deepseek2Gguf, KvBSplitsAndJoinsPerHead) {
  MlaConfig m;
  m.kv_lora_rank = 5;
  m.qk_nope_dim = 3;
  m.v_head_dim = 2;
  const int H = 2, L = 5, nope = 3, v = 2;
  std::vector<float> kv(size_t(H * (nope + v) * L));
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = float(i);
  std::vector<float> k(size_t(H * L * nope)), vb(size_t(H * v * L));
  split_mla_kv_b(m, H, kv.data(), k.data(), vb.data());
  // head 1, k row i = 2, latent l = 4: kv_b row 1 * 5 + 2, column 4
  EXPECT_EQ(k[size_t(1 * L * nope + 4 * nope + 2)], kv[size_t((1 * 5 + 2) * L + 4)]);
  // head 1, v row 1, latent 0: kv_b row 1 * 5 + 3 + 1
  EXPECT_EQ(vb[size_t(1 * v * L + 1 * L + 0)], kv[size_t((1 * 5 + 4) * L)]);
  EXPECT_EQ(join_mla_kv_b(m, H, k, vb), kv);
}

// A split-layout file whose keys contradict one latent KV head is refused naming the key.
TEST(Deepseek2Gguf, RefusesAnInconsistentSplitLayout) {
  const std::string src = mla_file("tiny", MlaFileLayout::Split, "refuse");
  const std::string dst = unique_temp("kamera-mla-split-refused.gguf");
  const struct {
    const char* key;
    uint32_t value;
    const char* expect;
  } cases[] = {{"deepseek2.attention.head_count_kv", 4, "head_count_kv = 4"},
               {"deepseek2.attention.key_length", 24, "key_length = 24"},
               {"deepseek2.attention.value_length", 16, "value_length = 16"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key);
    copy_gguf(src, dst, [&](GgufWriter& w) { w.set_u32(c.key, c.value); });
    auto m = load_model(dst);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.message().find(c.expect), std::string::npos) << m.message();
  }
  // key_length_mla without value_length_mla: copy a kv_b file and add one key
  copy_gguf(mla_file("tiny", MlaFileLayout::KvB, "refuse-kvb"), dst,
            [](GgufWriter& w) { w.set_u32("deepseek2.attention.key_length_mla", 24); });
  auto m = load_model(dst);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("key_length_mla without"), std::string::npos) << m.message();
}

// A DeepSeek-V3-style decoder written by llama.cpp's own gguf-py the way its converter lays MLA out
// today (tests/data/deepseek2/make_split_fixture.py: q low-rank, one dense and one MoE layer with
// sigmoid scores, groups, the selection bias, YaRN), and llama.cpp d32676d's logits of it at every
// position (f32 KV, flash attention off; tests/data/deepseek2/README.md).
TEST(Deepseek2Gguf, SplitLayoutFromLlamaCppConverterMatchesLlamaCpp) {
  const std::string dir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/deepseek2/";
  std::ifstream mf(dir + "llama_cpp_split.json");
  ASSERT_TRUE(mf);
  const auto c = nlohmann::json::parse(mf);
  const std::string path = dir + c["file"].get<std::string>();
  EXPECT_EQ(tiny::file_xxh3(path), c["xxh3_64"].get<std::string>());
  auto m = tiny::load(path);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->cfg.mla.file_layout, MlaFileLayout::Split);
  EXPECT_EQ(m->cfg.n_kv_heads, 4);
  EXPECT_EQ(m->cfg.head_dim, 24);
  EXPECT_EQ(m->cfg.mla.v_head_dim, 16);
  EXPECT_EQ(m->cfg.moe.gating, MoeGating::Sigmoid);
  EXPECT_TRUE(m->cfg.moe.selection_bias);
  EXPECT_EQ(m->cfg.rope.yarn.orig_ctx, 64);
  tiny::check_llama_cpp_logits(*m, c["tokens"].get<std::vector<int32_t>>(),
                               dir + c["logits"].get<std::string>());
}
