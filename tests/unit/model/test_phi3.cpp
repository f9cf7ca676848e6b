// Phi-3 / Phi-4-mini (model/phi3.h): a file written by llama.cpp's own gguf-py as its converter
// writes Phi-4-mini (fused attn_qkv and ffn_up, partial rotary, LongRoPE factors, attn_factor)
// against llama.cpp's logits with each factor set; the fused tensors as views in a quantized
// copy; LongRoPE's rotation on its own (relocation exact, the pass-through dims untouched).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "gguf/gguf.h"
#include "jinja/chat_template.h"
#include "model/phi3.h"
#include "reuse/relocate.h"
#include "support/gguf_copy.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "synthetic/synthetic_model.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/phi3/";

nlohmann::json manifest() {
  std::ifstream mf(kDir + "llama_cpp_logits.json");
  EXPECT_TRUE(mf);
  return mf ? nlohmann::json::parse(mf) : nlohmann::json{};
}

std::unique_ptr<Model> load_for_context(const std::string& path, int64_t n_ctx) {
  LoadOptions o;
  o.n_ctx = n_ctx;
  auto m = load_model(path, o);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? std::move(m.value()) : nullptr;
}

// Phi-4-mini's rope in small: NeoX, 12 of 16 dims rotated, LongRoPE factors, attn_factor.
RopeDesc phi_rope() {
  RopeDesc d;
  d.layout = RopeLayout::Neox;
  d.head_dim = 16;
  d.n_rot = 12;
  d.freq_factors = {1.0f, 1.7f, 2.9f, 4.1f, 6.3f, 7.9f};
  d.attn_factor = 1.0408;
  return d;
}

}  // namespace

// llama.cpp picks rope_factors_short at a context <= the original 4096 and rope_factors_long above
// it; kamera's logits with the same choice must be within 1e-4 of the largest |logit| at every
// position, for both (the two references differ by 0.63 of it, so each checks its own set).
TEST(Phi3Gguf, LogitsMatchLlamaCppWithShortAndLongFactors) {
  const auto c = manifest();
  const std::string path = kDir + c["file"].get<std::string>();
  EXPECT_EQ(tiny::file_xxh3(path), c["xxh3_64"].get<std::string>());
  const auto ids = c["tokens"].get<std::vector<int32_t>>();
  for (const auto& k : c["cases"]) {
    SCOPED_TRACE(k["factors"].get<std::string>());
    auto m = load_for_context(path, k["n_ctx"].get<int64_t>());
    ASSERT_TRUE(m);
    EXPECT_EQ(m->cfg.arch, Arch::Phi3);
    EXPECT_EQ(m->cfg.rope.layout, RopeLayout::Neox);
    EXPECT_EQ(m->cfg.rope.n_rot, 12);
    EXPECT_EQ(m->cfg.head_dim, 16);
    EXPECT_EQ(m->cfg.longrope.orig_ctx, 4096);
    EXPECT_NEAR(m->cfg.rope.attn_factor, 1.0408, 1e-4);
    EXPECT_EQ(m->cfg.rope.freq_factors, k["factors"] == "short" ? m->cfg.longrope.short_factors
                                                                : m->cfg.longrope.long_factors);
    const double rel = tiny::check_llama_cpp_logits(*m, ids, kDir + k["logits"].get<std::string>());
    std::printf("phi3 %s factors (n_ctx %d): max |kamera - llama.cpp| / max |logit| = %.3g\n",
                k["factors"].get<std::string>().c_str(), k["n_ctx"].get<int>(), rel);
  }
}

// The default context is the trained one (8192 > 4096: the long factors, as llama.cpp's n_ctx 0),
// and the two choices are different models (fingerprints: their keys differ).
TEST(Phi3Gguf, TheContextChoosesTheFactorSet) {
  const std::string path = kDir + "phi3_tiny.gguf";
  auto def = tiny::load(path);
  auto at4096 = load_for_context(path, 4096), at4097 = load_for_context(path, 4097);
  ASSERT_TRUE(def && at4096 && at4097);
  EXPECT_EQ(def->cfg.rope.freq_factors, def->cfg.longrope.long_factors);
  EXPECT_EQ(at4096->cfg.rope.freq_factors, at4096->cfg.longrope.short_factors);
  EXPECT_EQ(at4097->cfg.rope.freq_factors, at4097->cfg.longrope.long_factors);
  EXPECT_EQ(def->fingerprint, at4097->fingerprint);
  EXPECT_NE(def->fingerprint, at4096->fingerprint);
  const auto f = model_features(def->cfg);
  auto has = [&f](const std::string& s) {
    for (const auto& x : f)
      if (x.rfind(s, 0) == 0) return true;
    return false;
  };
  EXPECT_TRUE(has("partial_rotary (12 of 16"));
  EXPECT_TRUE(has("longrope (long factors in use"));
}

// The fused attn_qkv and ffn_up are row ranges of one tensor: the f32 file's q/k/v and gate/up
// weights hold exactly its rows in order; a copy with every matrix in Q8_0 slices the same way
// (whole blocks: the k rows dequantize to the fused tensor's) and stays within Q8_0's error of the
// f32 logits (4.2e-2 of the largest |logit| measured; 5e-2 allowed).
TEST(Phi3Gguf, FusedTensorsSliceInTheirType) {
  const std::string path = kDir + "phi3_tiny.gguf";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok());
  auto m = tiny::load(path);
  ASSERT_TRUE(m);
  const GgufTensor* qkv = (*f)->find_tensor("blk.1.attn_qkv.weight");
  const GgufTensor* up = (*f)->find_tensor("blk.1.ffn_up.weight");
  ASSERT_TRUE(qkv && up);
  const LayerWeights& L = m->layers[1];
  const auto q = L.wq.to_f32(), k = L.wk.to_f32(), v = L.wv.to_f32();
  const auto all = (*f)->read_f32(*qkv);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(0, std::memcmp(q.data(), all->data(), q.size() * 4));
  EXPECT_EQ(0, std::memcmp(k.data(), all->data() + q.size(), k.size() * 4));
  EXPECT_EQ(0, std::memcmp(v.data(), all->data() + q.size() + k.size(), v.size() * 4));
  const auto gu = (*f)->read_f32(*up);
  ASSERT_TRUE(gu.ok());
  const auto gate = L.w_gate.to_f32(), upw = L.w_up.to_f32();
  EXPECT_EQ(0, std::memcmp(gate.data(), gu->data(), gate.size() * 4));
  EXPECT_EQ(0, std::memcmp(upw.data(), gu->data() + gate.size(), upw.size() * 4));

  const std::string q8 = unique_temp("kamera-phi3-q8.gguf");
  tiny::copy_gguf(
      path, q8, [](GgufWriter&) {}, {}, DType::Q8_0);
  auto mq = load_for_context(q8, 512);
  ASSERT_TRUE(mq);
  EXPECT_EQ(mq->layers[1].wq.type(), GgmlType::Q8_0);
  EXPECT_EQ(mq->layers[1].w_up.type(), GgmlType::Q8_0);
  auto qf = GgufFile::open(q8);
  ASSERT_TRUE(qf.ok());
  const GgufTensor* qkv8 = (*qf)->find_tensor("blk.0.attn_qkv.weight");
  ASSERT_TRUE(qkv8);
  const auto q8all = (*qf)->read_f32(*qkv8);
  ASSERT_TRUE(q8all.ok());
  const auto k8 = mq->layers[0].wk.to_f32();  // the k rows of the quantized fused tensor
  EXPECT_EQ(0, std::memcmp(k8.data(), q8all->data() + mq->cfg.q_width() * 64, k8.size() * 4));
  const auto ids = manifest()["tokens"].get<std::vector<int32_t>>();
  auto m512 = load_for_context(path, 512);
  ASSERT_TRUE(m512);
  const auto want = tiny::prefill_all(*m512, ids, 512), got = tiny::prefill_all(*mq, ids, 512);
  double scale = 0;
  for (float x : want) scale = std::max(scale, double(std::fabs(x)));
  const double rel = tiny::max_abs_diff(got, want) / scale;
  std::printf("phi3 Q8_0 copy vs f32: max diff / max |logit| = %.3g\n", rel);
  EXPECT_LT(rel, 0.05);
  EXPECT_GT(rel, 0.0);  // it did run in Q8_0
}

// LongRoPE is still a rotation by pos * freq(i), freq(i) = theta^(-2i/n_rot) / factor_i: rotating
// to a and then by b is rotating to a + b (to f32 rounding), and the dims past n_rot stay
// bit-identical through every rotation and through the attn_factor magnitude.
TEST(LongRope, RelocationIsExactAndLeavesThePassThroughDims) {
  const RopeDesc d = phi_rope();
  for (int i = 0; i < d.n_pairs(); ++i)
    EXPECT_NEAR(d.pair_freq(i), std::pow(10000.0, -2.0 * i / 12) / d.freq_factors[i], 1e-15);
  const RopeCache rope(d, 256);
  const int heads = 3, n = 1;
  std::mt19937 rng(5);
  std::normal_distribution<float> g;
  std::vector<float> x(size_t(heads) * d.head_dim);
  for (float& v : x) v = g(rng);
  const std::vector<float> orig = x;
  for (const auto& [a, b] : {std::pair{5, 7}, {200, 3000}, {-40, 90}, {1000, 100000}}) {
    std::vector<float> two = orig, one = orig;
    const Pos pa = Pos::linear(a), pb = Pos::linear(b), pab = Pos::linear(a + b);
    relocate_rope_channel(rope, heads, two.data(), n, heads * d.head_dim, {&pa, 1});
    relocate_rope_channel(rope, heads, two.data(), n, heads * d.head_dim, {&pb, 1});
    relocate_rope_channel(rope, heads, one.data(), n, heads * d.head_dim, {&pab, 1});
    for (int h = 0; h < heads; ++h) {
      for (int j = 0; j < d.n_rot; ++j)
        EXPECT_NEAR(two[h * 16 + j], one[h * 16 + j], 2e-5 * (1 + std::fabs(one[h * 16 + j])))
            << a << "+" << b << " head " << h << " dim " << j;
      EXPECT_EQ(0, std::memcmp(&two[h * 16 + 12], &orig[h * 16 + 12], 4 * 4));
      EXPECT_EQ(0, std::memcmp(&one[h * 16 + 12], &orig[h * 16 + 12], 4 * 4));
    }
  }
  std::vector<float> s = orig;
  rope_scale_rotary(d, s.data(), heads);
  for (int h = 0; h < heads; ++h) {
    for (int j = 0; j < d.n_rot; ++j)
      EXPECT_EQ(s[h * 16 + j], orig[h * 16 + j] * float(d.attn_factor));
    EXPECT_EQ(0, std::memcmp(&s[h * 16 + 12], &orig[h * 16 + 12], 4 * 4));
  }
}

// make-model --arch phi3 writes what the loader reads back (fused tensors, the factor sets, the
// original context, attn_factor) with the Phi chat tokens (control pieces) and template: a system
// and a user turn render as <|system|>...<|end|><|user|>...<|end|><|assistant|>. phi4-mini has
// Phi-4-mini-instruct's 3.84 billion weights.
TEST(Phi3MakeModel, WritesTheLayoutTheLoaderReadsWithTheChatTemplate) {
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(Arch::Phi3, "tiny");
  spec.seed = 3;
  const std::string path = unique_temp("kamera-phi3-make.gguf");
  ASSERT_TRUE(write_synthetic_gguf(spec, path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE((*f)->find_tensor("blk.1.attn_qkv.weight"));
  EXPECT_FALSE((*f)->find_tensor("blk.1.ffn_gate.weight"));
  auto m = tiny::load(path);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->cfg.longrope.short_factors, spec.cfg.longrope.short_factors);
  EXPECT_EQ(m->cfg.longrope.long_factors, spec.cfg.longrope.long_factors);
  EXPECT_EQ(m->cfg.longrope.orig_ctx, 4096);
  EXPECT_NEAR(m->cfg.rope.attn_factor, std::sqrt(1 + std::log(2.0) / std::log(4096.0)), 1e-6);
  EXPECT_EQ(m->cfg.rope.n_rot, 12);
  ASSERT_TRUE(m->tokenizer);
  const Tokenizer& tok = *m->tokenizer;
  for (const char* t : {"<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"}) {
    int found = 0;
    for (int32_t id = 0; id < tok.n_vocab(); ++id)
      found += tok.piece(id) == t && tok.vocab().types[size_t(id)] == TokenType::Control;
    EXPECT_EQ(found, 1) << t;
  }
  auto tmpl = ChatTemplate::from_gguf(tok.vocab().chat_template);
  ASSERT_TRUE(tmpl.ok()) << tmpl.message();
  const std::vector<ChatMessage> msgs = {{"system", "You are terse."}, {"user", "Hi"}};
  auto text = tmpl->render(msgs, ChatRenderOptions{});
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_EQ(*text, "<|system|>You are terse.<|end|><|user|>Hi<|end|><|assistant|>");

  const auto big = synthetic_preset(Arch::Phi3, "phi4-mini");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->rope.n_rot, 96);
  EXPECT_EQ(big->longrope.long_factors.size(), 48u);
  EXPECT_NEAR(double(count_parameters(*big)), 3.836e9, 0.01e9);
}
