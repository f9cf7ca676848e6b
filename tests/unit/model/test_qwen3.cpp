// Qwen3 and Qwen3-MoE (model/qwen3.h): the engine against the naive reference and against
// llama.cpp's logits (committed fixtures), the head width from key_length, the weights in their
// file's type, and what the loader refuses. Chunk reuse on both families runs in test_reuse.cpp
// (ReuseArch), the window in test_window.cpp, the half-width KV pools in test_kv_dtype.cpp.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "ops/quant_repack.h"
#include "support/gguf_copy.h"
#include "support/naive_forward.h"
#include "support/quant_data.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

using tiny::copy_gguf;
using tiny::prefill_all;

struct Family {
  const char* arch;
  Arch kind;
};
const Family kFamilies[] = {{"qwen3", Arch::Qwen3}, {"qwen3moe", Arch::Qwen3Moe}};

}  // namespace

// Prefill (every position) and decode (token by token) against the naive double-precision
// forward, which norms each q and k head before the rotation (support/naive_forward.h).
TEST(Qwen3, ForwardMatchesNaive) {
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.arch);
    auto m = tiny::load(tiny::model_path(f.arch));
    ASSERT_TRUE(m);
    ASSERT_TRUE(m->cfg.qk_norm);
    const int n = 30;
    auto ids = tiny::random_tokens(n, m->cfg.n_vocab, 11);
    const auto got = prefill_all(*m, ids, 512);
    const auto want = naive::logits_from_zero(*m, ids);
    EXPECT_LT(tiny::max_abs_diff(got, want), 1e-4);
    auto pool = tiny::pool_for(*m, 64);
    Engine e(*m, 1);
    const SeqId s = pool->create_sequence();
    const auto pos = tiny::linear_positions(n);
    std::vector<float> last;
    for (int t = 0; t < n; ++t) {
      auto r = e.forward(*pool, s, ForwardInput::from_tokens({&ids[t], 1}, {&pos[t], 1}));
      ASSERT_TRUE(r.ok()) << r.message();
      last = *r;
    }
    EXPECT_LT(tiny::max_abs_diff(last, std::vector<float>(want.end() - m->cfg.n_vocab, want.end())),
              1e-4);
  }
}

// The norms matter: the same file with every q/k norm weight scaled by 3 gives other logits
// (RMSNorm is scale-free in its input, not in its weight), so a forward that skipped them would
// fail the comparisons above and below.
TEST(Qwen3, HeadNormsChangeTheResult) {
  const std::string src = tiny::model_path("qwen3");
  auto m = tiny::load(src);
  ASSERT_TRUE(m);
  auto ids = tiny::random_tokens(12, m->cfg.n_vocab, 5);
  const auto base = prefill_all(*m, ids, 512);
  for (LayerWeights& l : m->layers)
    for (auto* v : {&l.q_norm, &l.k_norm})
      for (float& x : *v) x *= 3.0f;
  EXPECT_GT(tiny::max_abs_diff(prefill_all(*m, ids, 512), base), 1e-3);
}

// The head width is attention.key_length (4 heads of 32 on a 64 residual, as Qwen3-0.6B's 16 of
// 128 on 1024); the rope turns every channel in the NeoX layout; no biases; the presets' sizes.
TEST(Qwen3Gguf, ShapesKeysAndFeatures) {
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.arch);
    auto m = tiny::load(tiny::model_path(f.arch));
    ASSERT_TRUE(m);
    const ModelConfig& c = m->cfg;
    EXPECT_EQ(c.arch, f.kind);
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_EQ(c.q_width(), 128);
    EXPECT_NE(c.q_width(), c.dim);
    EXPECT_EQ(c.rope.n_rot, c.head_dim);
    EXPECT_EQ(c.rope.layout, RopeLayout::Neox);
    EXPECT_FALSE(c.qkv_bias);
    EXPECT_EQ(m->layers[0].q_norm.size(), 32u);
    EXPECT_EQ(m->layers[1].k_norm.size(), 32u);
    const auto feats = model_features(c);
    EXPECT_NE(std::find_if(feats.begin(), feats.end(),
                           [](const std::string& s) { return s.starts_with("qk_norm"); }),
              feats.end());
    auto n = [](const Weight& w) { return w.rows() * w.cols(); };
    int64_t held = n(m->tok_embd) + int64_t(m->out_norm.size()) + n(m->output);
    for (const LayerWeights& l : m->layers) {
      for (const auto* v : {&l.attn_norm, &l.ffn_norm, &l.q_norm, &l.k_norm})
        held += int64_t(v->size());
      for (const Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_down, &l.w_up})
        held += n(*w);
      l.moe.for_each([&](const char*, const Weight& w) { held += n(w); });
    }
    EXPECT_EQ(held, count_parameters(c));
  }
  auto moe = tiny::load(tiny::model_path("qwen3moe"));
  ASSERT_TRUE(moe);
  EXPECT_EQ(moe->cfg.moe.n_experts, 8);
  EXPECT_EQ(moe->cfg.moe.n_used, 2);
  EXPECT_EQ(moe->cfg.moe.n_shared, 0);
  EXPECT_TRUE(moe->cfg.moe.norm_weights);
  for (const LayerWeights& l : moe->layers) EXPECT_TRUE(l.moe.routed());
  // the real shapes: Qwen3-0.6B holds 0.596e9 weights (tied embedding), the two-layer
  // Qwen3-30B-A3B 1.87e9 (its 48 layers: 30.5e9)
  const int64_t q06 = count_parameters(*synthetic_preset(Arch::Qwen3, "0.6b"));
  EXPECT_GT(q06, int64_t(0.59e9));
  EXPECT_LT(q06, int64_t(0.60e9));
  const ModelConfig a3b = *synthetic_preset(Arch::Qwen3Moe, "30b-a3b-2l");
  EXPECT_EQ(a3b.head_dim * a3b.n_heads, 4096);
  const int64_t per_layer = (count_parameters(a3b) - 2 * int64_t(a3b.n_vocab) * a3b.dim) / 2;
  EXPECT_GT(48 * per_layer + 2 * int64_t(a3b.n_vocab) * a3b.dim, int64_t(30.4e9));
  EXPECT_LT(48 * per_layer + 2 * int64_t(a3b.n_vocab) * a3b.dim, int64_t(30.6e9));
}

// F16 and Q8_0 files: every matrix the model holds is the file's tensor (its type, its bytes,
// in place in the mapping: loaded bit for bit), and the forward matches the naive reference on
// the same (dequantized) weights.
TEST(Qwen3Gguf, WeightsStayInTheFileTypeAndMatchTheNaiveForward) {
  for (const Family& f : kFamilies)
    for (DType type : {DType::F16, DType::Q8_0}) {
      SCOPED_TRACE(std::string(f.arch) + " " + std::string(dtype_name(type)));
      const std::string path = tiny::model_path(f.arch, type);
      auto m = tiny::load(path);
      ASSERT_TRUE(m);
      auto file = GgufFile::open(path);
      ASSERT_TRUE(file.ok());
      int quantized = 0;
      m->for_each_weight([&](const std::string& name, const Weight& w) {
        const GgufTensor* t = (*file)->find_tensor(name);
        ASSERT_NE(t, nullptr) << name;
        EXPECT_EQ(w.type(), t->type) << name;
        EXPECT_EQ(w.bytes(), t->nbytes) << name;
        // A Q8_0 matrix the decode path repacked (ops/quant_repack.h) holds the same rows in
        // another order, in owned memory; a decode matrix in F16/BF16 may be copied as it is into
        // the load's huge-page block (model/repack.h); every other matrix is the mapped bytes.
        std::vector<uint8_t> rows(w.bytes());
        if (w.layout() != WeightLayout::Rows)
          quant::unpack_x16_rows(w.view(), 0, w.rows(), rows.data());
        const void* held = w.layout() != WeightLayout::Rows ? rows.data() : w.raw();
        EXPECT_EQ(std::memcmp(held, t->data, t->nbytes), 0) << name;
        const bool half = w.type() == GgmlType::F16 || w.type() == GgmlType::BF16;
        if (w.layout() != WeightLayout::Rows) EXPECT_TRUE(w.owned()) << name;
        if (w.layout() == WeightLayout::Rows && w.owned())
          EXPECT_TRUE(half) << name << " was copied out of the mapping";
        quantized += w.type() != GgmlType::F32;
      });
      EXPECT_GT(quantized, 4);
      const int n = 12;
      auto ids = tiny::random_tokens(n, m->cfg.n_vocab, 4);
      const auto got = prefill_all(*m, ids, 512);
      std::vector<int> p(n);
      for (int i = 0; i < n; ++i) p[i] = i;
      const auto want = naive::forward_all(*m, std::vector<int>(ids.begin(), ids.end()), p);
      const std::vector<float> last(got.end() - m->cfg.n_vocab, got.end());
      // the products run the quantized kernels (8-bit activations, bf16 panels), as for deepseek2
      EXPECT_LT(quant_data::nmse(last.data(), want.data(), int64_t(want.size())), 1e-3);
    }
}

TEST(Qwen3Gguf, RefusesWhatItDoesNotRun) {
  const std::string dst = unique_temp("kamera-qwen3-refused.gguf");
  struct Case {
    const char* arch;
    std::function<void(GgufWriter&)> set;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"qwen3moe", [](GgufWriter& w) { w.set_bool("qwen3moe.expert_weights_norm", false); },
       "expert_weights_norm"},
      {"qwen3moe", [](GgufWriter& w) { w.set_u32("qwen3moe.expert_shared_count", 1); },
       "expert_shared_count"},
      {"qwen3moe", [](GgufWriter& w) { w.set_f32("qwen3moe.expert_weights_scale", 2.5f); },
       "expert_weights_scale"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expect);
    copy_gguf(tiny::model_path(c.arch), dst, c.set);
    auto m = load_model(dst);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.code(), ErrorCode::Unsupported) << m.message();
    EXPECT_NE(m.message().find(c.expect), std::string::npos) << m.message();
  }
  copy_gguf(tiny::model_path("qwen3moe"), dst, [](GgufWriter&) {});
  EXPECT_TRUE(load_model(dst).ok());  // the unchanged copy loads
}

// llama.cpp (unslothai d32676d, CPU, f32 KV, one batch) loaded the tiny qwen3 and qwen3moe files
// and its logits at every position are committed (tests/data/qwen3/README.md says how they were
// made). The files are regenerated here from their make-model arguments; their bytes must hash
// as they did.
TEST(Qwen3Gguf, LogitsMatchLlamaCpp) {
  const std::string dir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen3/";
  const auto manifest = tiny::llama_cpp_manifest(dir);
  ASSERT_EQ(manifest["cases"].size(), 4u);
  for (const auto& c : manifest["cases"]) {
    const std::string arch = c["arch"], dims = c["dims"];
    SCOPED_TRACE(arch + " " + dims);
    // what `kamera make-model --arch A --preset tiny --seed S --dims D` writes
    SyntheticSpec spec;
    spec.cfg = *synthetic_preset(*arch_from_name(arch), "tiny");
    ASSERT_TRUE(apply_dims(spec.cfg, dims).ok());
    spec.seed = c["seed"];
    spec.name = fmt::format("kamera-synthetic-{}-tiny-seed{}", arch, spec.seed);
    std::printf("%s seed %d dims '%s': max |kamera - llama.cpp| / max |logit| = %.2e\n",
                arch.c_str(), int(spec.seed), dims.c_str(),
                tiny::check_llama_cpp_case(spec, c, dir));
  }
}
