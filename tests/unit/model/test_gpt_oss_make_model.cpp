// make-model --arch gpt-oss (synthetic/gpt_oss_shapes.h): the tiny preset writes what the
// loader (model/gpt_oss.h) reads back, experts in MXFP4 as llama.cpp's converter writes them, and
// llama.cpp computes the same logits from it; gpt-oss-20b has the released model's shape and
// weight count. Chunk reuse on the tiny preset
// runs in test_reuse.cpp (ReuseArch "gpt-oss").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "model/gpt_oss.h"
#include "support/gguf_copy.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "synthetic/synthetic_model.h"

using namespace kamera;

namespace {

bool has_feature(const ModelConfig& c, const std::string& prefix) {
  const auto f = model_features(c);
  return std::any_of(f.begin(), f.end(),
                     [&](const std::string& x) { return x.starts_with(prefix); });
}

}  // namespace

TEST(GptOssMakeModel, TinyPresetLoadsWithSinksBiasesAndMxfp4Experts) {
  const std::string path = tiny::model_path("gpt-oss");
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  const GgufTensor* gate = (*f)->find_tensor("blk.1.ffn_gate_exps.weight");
  ASSERT_TRUE(gate);
  EXPECT_EQ(gate->type, GgmlType::MXFP4);
  EXPECT_FALSE((*f)->find_tensor("blk.0.ffn_norm.weight"));  // the FFN norm is post_attention_norm
  EXPECT_FALSE((*f)->get_int("gpt-oss.attention.sliding_window_pattern"));  // the converter's: 2
  auto m = tiny::load(path);
  ASSERT_TRUE(m);
  const ModelConfig& c = m->cfg;
  EXPECT_EQ(c.arch, Arch::GptOss);
  EXPECT_EQ(c.q_width(), 128);  // 4 heads of 32 over a residual of 64, as gpt-oss
  EXPECT_EQ(c.layer_kinds.window, 8);
  EXPECT_EQ(c.layer_kinds.at(0), LayerKind::Local);
  EXPECT_EQ(c.layer_kinds.at(1), LayerKind::Global);
  EXPECT_EQ(c.rope.yarn.ext_factor, 1.0);
  EXPECT_EQ(c.rope.yarn.orig_ctx, 256);
  EXPECT_DOUBLE_EQ(c.rope.freq_scale, 1.0 / 32);
  const float mscale = 1.0f + 0.1f * std::log(32.0f);
  EXPECT_FLOAT_EQ(c.attn_scale, mscale * mscale / std::sqrt(32.0f));
  EXPECT_FALSE(c.tied_output);
  const LayerWeights& L = m->layers[1];
  EXPECT_EQ(L.attn_sinks.size(), 4u);
  EXPECT_EQ(L.bo.size(), 64u);
  EXPECT_EQ(L.bq.size(), 128u);
  EXPECT_EQ(L.moe.router_b.size(), 4u);
  EXPECT_EQ(L.moe.up_b.size(), 4u * 64);
  EXPECT_EQ(L.moe.gate_exps.type(), GgmlType::MXFP4);
  EXPECT_EQ(L.moe.up_exps.type(), GgmlType::MXFP4);
  EXPECT_EQ(L.moe.down_exps.type(), GgmlType::MXFP4);
  EXPECT_EQ(L.moe.router.type(), GgmlType::F32);
  EXPECT_EQ(L.wq.type(), GgmlType::F32);
  EXPECT_TRUE(has_feature(c, "attention_sinks"));
  EXPECT_TRUE(has_feature(c, "swa_alternation (sliding window 8"));
  EXPECT_TRUE(has_feature(c, "oai_experts (router and expert biases, top 2 of 4"));
}

// gpt-oss-20b as released (openai/gpt-oss-20b's config.json; its model card's 20.9 B weights,
// counted tensor by tensor as 20,914,757,184); --dims layers keeps the period-2 alternation.
TEST(GptOssMakeModel, Preset20bHasTheReleasedShape) {
  const auto names = synthetic_preset_names(Arch::GptOss);
  EXPECT_NE(std::find(names.begin(), names.end(), "gpt-oss-20b"), names.end());
  auto c = synthetic_preset(Arch::GptOss, "gpt-oss-20b");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->n_layers, 24);
  EXPECT_EQ(c->q_width(), 4096);
  EXPECT_EQ(c->kv_width(), 512);
  EXPECT_EQ(c->moe.n_experts, 32);
  EXPECT_EQ(c->moe.n_used, 4);
  EXPECT_EQ(c->rope.yarn.orig_ctx, 4096);
  EXPECT_EQ(c->layer_kinds.window, 128);
  EXPECT_EQ(count_parameters(*c), 20914757184);
  ASSERT_TRUE(apply_dims(*c, "layers=3").ok());
  EXPECT_EQ(c->layer_kinds.kinds,
            (std::vector<LayerKind>{LayerKind::Local, LayerKind::Global, LayerKind::Local}));
}

// gpt-oss-20b-2l (the benchmark's small shape, docs/BENCHMARKS.md): the released shapes with 2 of
// the 24 layers, one sliding-window and one full. Its weights are the released count less 22
// layers' share: (20,914,757,184 - 2 x 201088 x 2880 (embedding, output) - 2880) / 24 per layer.
TEST(GptOssMakeModel, Preset20b2lIsTheReleasedShapeWithTwoLayers) {
  const auto names = synthetic_preset_names(Arch::GptOss);
  EXPECT_NE(std::find(names.begin(), names.end(), "gpt-oss-20b-2l"), names.end());
  auto full = synthetic_preset(Arch::GptOss, "gpt-oss-20b");
  auto two = synthetic_preset(Arch::GptOss, "gpt-oss-20b-2l");
  ASSERT_TRUE(full && two);
  EXPECT_EQ(two->n_layers, 2);
  EXPECT_EQ(two->layer_kinds.kinds, (std::vector<LayerKind>{LayerKind::Local, LayerKind::Global}));
  const int64_t ends = 2 * int64_t(201088) * 2880 + 2880;
  const int64_t per_layer = (int64_t(20914757184) - ends) / 24;
  EXPECT_EQ(per_layer * 24 + ends, 20914757184);
  EXPECT_EQ(count_parameters(*two), ends + 2 * per_layer);
  ASSERT_TRUE(apply_dims(*full, "layers=2").ok());
  EXPECT_EQ(count_parameters(*full), count_parameters(*two));
  EXPECT_EQ(two->attn_scale, full->attn_scale);
  EXPECT_EQ(two->rope.yarn.orig_ctx, full->rope.yarn.orig_ctx);
}

// llama.cpp d32676d reads make-model's tiny gpt-oss (seed 3) as kamera does: its logits of 16
// tokens in one batch (tests/data/gpt_oss_make_model/README.md) against kamera's, token by token
// and as one batch, within 1e-4 of the largest |logit| (the bound of GptOssGguf's converter file
// token by token), argmax equal at every position.
TEST(GptOssMakeModel, LlamaCppReadsTheFileAsKameraDoes) {
  const std::string dir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/gpt_oss_make_model/";
  std::ifstream mf(dir + "llama_cpp_logits.json");
  ASSERT_TRUE(mf);
  const auto c = nlohmann::json::parse(mf);
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(Arch::GptOss, "tiny");
  spec.seed = 3;
  spec.name = "kamera-synthetic-gpt-oss-tiny-seed3";  // as make-model names it
  const std::string path = unique_temp("kamera-gpt-oss-make-seed3.gguf");
  ASSERT_TRUE(write_synthetic_gguf(spec, path).ok());
  EXPECT_EQ(tiny::file_xxh3(path), c["xxh3_64"].get<std::string>()) << "the file changed";
  auto m = tiny::load(path);
  ASSERT_TRUE(m);
  const auto ids = c["tokens"].get<std::vector<int32_t>>();
  const size_t V = size_t(m->cfg.n_vocab);
  std::vector<float> want(ids.size() * V);
  std::ifstream f(dir + c["logits"].get<std::string>(), std::ios::binary);
  f.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * 4));
  ASSERT_TRUE(f) << "short logits file";
  double scale = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  for (int batch : {1, 512}) {
    const auto got = tiny::prefill_all(*m, ids, batch);
    const double rel = tiny::max_abs_diff(got, want) / scale;
    int arg = 0;
    for (size_t t = 0; t < ids.size() && got.size() == want.size(); ++t) {
      const auto g = got.cbegin() + std::ptrdiff_t(t * V),
                 w = want.cbegin() + std::ptrdiff_t(t * V);
      arg += std::max_element(g, g + std::ptrdiff_t(V)) - g !=
             std::max_element(w, w + std::ptrdiff_t(V)) - w;
    }
    std::printf(
        "make-model gpt-oss (max_batch %d): max |kamera - llama.cpp| / max |logit| = %.3g, "
        "argmax differs at %d of %zu\n",
        batch, rel, arg, ids.size());
    EXPECT_LT(rel, 1e-4) << "max_batch " << batch;
    EXPECT_EQ(arg, 0);
  }
}
