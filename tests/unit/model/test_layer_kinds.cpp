// Per-layer attention kinds (model/layer_kinds.h): SmolLM3's layers without rope and Gemma 3's
// sliding-window and global layers, against llama.cpp's logits on files written by llama.cpp's
// own gguf-py (tests/data/layer_kinds/README.md), and what reuse needs of them: a NoRope layer
// reads its keys as stored at any position, a local layer reads only keys whose position is
// inside its window, wherever a relocation put them.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>

#include "model/layer_kinds.h"
#include "support/gguf_copy.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/layer_kinds/";

std::string file_hash(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), {});
  return fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size()));
}

std::vector<float> read_f32(const std::string& name, size_t n) {
  std::vector<float> v(n);
  std::ifstream f(kDir + name, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * 4));
  EXPECT_TRUE(f) << "short logits file " << name;
  return v;
}

// max |got - want| / max |want| over every position; counts the positions whose argmax differs.
double relative_diff(const std::vector<float>& got, const std::vector<float>& want, size_t V,
                     int* argmax_diff) {
  double scale = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  *argmax_diff = 0;
  for (size_t t = 0; t < want.size() / V && got.size() == want.size(); ++t) {
    auto row = [&](const std::vector<float>& v) {
      const auto b = v.begin() + std::ptrdiff_t(t * V);
      return std::max_element(b, b + std::ptrdiff_t(V)) - b;
    };
    *argmax_diff += row(got) != row(want);
  }
  return tiny::max_abs_diff(got, want) / scale;
}

nlohmann::json manifest() {
  std::ifstream mf(kDir + "llama_cpp_logits.json");
  EXPECT_TRUE(mf) << "missing manifest";
  return mf ? nlohmann::json::parse(mf) : nlohmann::json::object();
}

// Every case of `arch`: the file's hash, then kamera's logits at every position against
// llama.cpp's (within the case's max_rel of the largest |logit|, 1e-4 unless the manifest says
// why not) and, where the case has one, against the float64 forward (within 1e-5).
void check_family(const std::string& arch) {
  int n = 0;
  const nlohmann::json all = manifest();
  for (const auto& c : all["cases"]) {
    if (c["arch"] != arch) continue;
    ++n;
    const std::string path = kDir + c["file"].get<std::string>();
    EXPECT_EQ(file_hash(path), c["xxh3_64"].get<std::string>()) << path << " changed";
    auto m = tiny::load(path);
    ASSERT_TRUE(m);
    const std::vector<int32_t> ids = c["tokens"];
    const size_t V = size_t(m->cfg.n_vocab);
    const auto got = tiny::prefill_all(*m, ids, 512);
    int argmax_diff = -1;
    const double rel = relative_diff(got, read_f32(c["logits"], ids.size() * V), V, &argmax_diff);
    std::printf("%s: max |kamera - llama.cpp| / max |logit| = %.2e, argmax differs at %d of %zu\n",
                c["file"].get<std::string>().c_str(), rel, argmax_diff, ids.size());
    EXPECT_LT(rel, c["max_rel"].get<double>());
    EXPECT_EQ(argmax_diff, 0);
    if (!c.contains("numpy_logits")) continue;
    const double f64 =
        relative_diff(got, read_f32(c["numpy_logits"], ids.size() * V), V, &argmax_diff);
    std::printf("%s: max |kamera - float64 forward| / max |logit| = %.2e\n",
                c["file"].get<std::string>().c_str(), f64);
    EXPECT_LT(f64, 1e-5);
    EXPECT_EQ(argmax_diff, 0);
  }
  EXPECT_GT(n, 0) << "no " << arch << " case";
}

// Runs layer `li` over the same hidden rows x on every token of a sequence whose positions are
// `pos` (the tokens were prefilled there first), and returns the layer's output rows.
std::vector<float> layer_output(const Model& m, const std::vector<int32_t>& ids,
                                const std::vector<Pos>& pos, int li, std::vector<float> x) {
  auto pool = tiny::pool_for(m, int(ids.size()) + 16);
  Engine e(m, 1);
  const SeqId s = pool->create_sequence();
  EXPECT_TRUE(e.forward(*pool, s, ForwardInput::from_tokens(ids, pos)).ok());
  std::vector<int> tokens(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) tokens[i] = int(i);
  EXPECT_TRUE(e.layer_step(*pool, s, li, tokens, x.data()).ok());
  return x;
}

// Records the attention mass each key gets, per layer.
struct MassObserver : ForwardObserver {
  std::vector<std::vector<float>> mass;
  float* key_mass(int layer, int n_keys) override {
    if (int(mass.size()) <= layer) mass.resize(size_t(layer) + 1);
    mass[size_t(layer)].assign(size_t(n_keys), 0.0f);
    return mass[size_t(layer)].data();
  }
};

}  // namespace

TEST(LayerKinds, Smollm3LogitsMatchLlamaCpp) {
  check_family("smollm3");
}

TEST(LayerKinds, Gemma3LogitsMatchLlamaCpp) {
  check_family("gemma3");
}

TEST(LayerKinds, LoaderReadsWhatTheConverterWrites) {
  auto s = tiny::load(kDir + "smollm3-tiny.gguf");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->cfg.layer_kinds.kinds, smollm3_layer_kinds(4));
  EXPECT_EQ(s->cfg.layer_kinds.at(3), LayerKind::NoRope);
  EXPECT_EQ(s->cfg.rope.layout, RopeLayout::Normal);
  auto g = tiny::load(kDir + "gemma3-tiny.gguf");
  ASSERT_TRUE(g);
  const LayerKinds& k = g->cfg.layer_kinds;
  EXPECT_EQ(k.window, 4);
  EXPECT_EQ(k.local_theta, 10000.0);
  EXPECT_EQ(g->cfg.rope.theta, 1000000.0);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(k.at(i), i == 5 ? LayerKind::Global : LayerKind::Local);
  EXPECT_EQ(g->cfg.rope.layout, RopeLayout::Neox);
  EXPECT_TRUE(g->cfg.qk_norm);
  EXPECT_FLOAT_EQ(attention_scale(g->cfg), 0.25f);  // 1 / sqrt(16)
  const auto f = model_features(g->cfg);
  EXPECT_NE(std::find_if(f.begin(), f.end(),
                         [](const std::string& s) { return s.starts_with("sliding_window (4"); }),
            f.end());
}

// A NoRope layer's keys are position-free: the same hidden rows give the same output bit for bit
// at any positions, so relocating tokens leaves the layer untouched. A rope layer over the same
// rows at other relative positions changes (the control).
TEST(LayerKinds, NoRopeLayerOutputDoesNotDependOnPositions) {
  auto m = tiny::load(kDir + "smollm3-tiny.gguf");
  ASSERT_TRUE(m);
  const int n = 12, d = m->cfg.dim;
  const auto ids = tiny::random_tokens(n, m->cfg.n_vocab, 3);
  std::vector<Pos> spread(n);
  for (int i = 0; i < n; ++i) spread[i] = Pos::linear(100 + 7 * i);
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n) * d);
  for (float& v : x) v = nd(rng);
  for (int li = 0; li < m->cfg.n_layers; ++li) {
    const auto a = layer_output(*m, ids, tiny::linear_positions(n), li, x);
    const auto b = layer_output(*m, ids, spread, li, x);
    if (m->cfg.layer_kinds.at(li) == LayerKind::NoRope) {
      EXPECT_EQ(a, b) << "layer " << li;
    } else {
      EXPECT_GT(tiny::max_abs_diff(a, b), 1e-3) << "layer " << li;
    }
  }
}

// A local layer's query at position p reads only keys at positions > p - W; the global layer reads
// them all. After relocating the first 4 tokens to just before the query, the local layers read
// those of them inside the window and no longer read the tokens the relocation left behind.
TEST(LayerKinds, LocalLayersReadOnlyTheWindowAfterRelocation) {
  auto m = tiny::load(kDir + "gemma3-tiny.gguf");
  ASSERT_TRUE(m);
  const int n = 12, W = m->cfg.layer_kinds.window;
  const auto ids = tiny::random_tokens(n + 1, m->cfg.n_vocab, 5);
  auto pool = tiny::pool_for(*m, 64);
  Engine e(*m, 1);
  const SeqId s = pool->create_sequence();
  const std::vector<int32_t> prefix(ids.begin(), ids.begin() + n);
  ASSERT_TRUE(
      e.forward(*pool, s, ForwardInput::from_tokens(prefix, tiny::linear_positions(n))).ok());
  auto decode = [&](Pos at) {
    MassObserver obs;
    ForwardOptions o;
    o.observer = &obs;
    auto fork = pool->fork(s);
    EXPECT_TRUE(fork.ok());
    EXPECT_TRUE(e.forward(*pool, *fork, ForwardInput::from_tokens({&ids[n], 1}, {&at, 1}), o).ok());
    pool->free_sequence(*fork);
    return obs.mass;
  };
  auto seen = [&](const std::vector<float>& mass, int tok) { return mass[size_t(tok)] > 0; };
  // query at position n: local layers see positions n - W + 1 .. n - 1 (tokens n-W+1 ..)
  auto mass = decode(Pos::linear(n));
  for (int li = 0; li < m->cfg.n_layers; ++li)
    for (int t = 0; t < n; ++t) {
      const bool local = m->cfg.layer_kinds.at(li) == LayerKind::Local;
      EXPECT_EQ(seen(mass[size_t(li)], t), !local || n - t < W) << "layer " << li << " token " << t;
    }
  // relocate tokens 0..3 to positions 40..43 and the query to 43 + W - 3: local layers now read
  // the relocated tokens inside the window (the last 3 of them) and none of 4..11 (positions
  // 4..11, far behind); the global layer reads all
  for (int t = 0; t < 4; ++t) pool->set_position(s, t, Pos::linear(40 + t));
  const int q = 40 + W;
  mass = decode(Pos::linear(q));
  for (int li = 0; li < m->cfg.n_layers; ++li)
    for (int t = 0; t < n; ++t) {
      const bool local = m->cfg.layer_kinds.at(li) == LayerKind::Local;
      const bool in_window = t < 4 && q - (40 + t) < W;
      EXPECT_EQ(seen(mass[size_t(li)], t), !local || in_window) << "layer " << li << " token " << t;
    }
}

// make-model's presets load back with their kinds, and the released shapes have the released
// sizes (SmolLM3-3B: 3.08 B weights; Gemma-3-1B: 1.00 B).
TEST(LayerKinds, MakeModelPresets) {
  for (const char* arch : {"smollm3", "gemma3"}) {
    SCOPED_TRACE(arch);
    const auto want = *synthetic_preset(*arch_from_name(arch), "tiny");
    auto m = tiny::load(tiny::model_path(arch));
    ASSERT_TRUE(m);
    EXPECT_EQ(m->cfg.layer_kinds.kinds, want.layer_kinds.kinds);
    EXPECT_EQ(m->cfg.layer_kinds.window, want.layer_kinds.window);
    EXPECT_EQ(attention_scale(m->cfg), attention_scale(want));
  }
  const auto s3 = *synthetic_preset(Arch::Smollm3, "3b");
  EXPECT_NEAR(count_parameters(s3) / 1e9, 3.08, 0.01);
  const auto g1 = *synthetic_preset(Arch::Gemma3, "1b");
  EXPECT_NEAR(count_parameters(g1) / 1e9, 1.00, 0.01);
  EXPECT_EQ(g1.layer_kinds.window, 512);
  int global = 0;
  for (LayerKind k : g1.layer_kinds.kinds) global += k == LayerKind::Global;
  EXPECT_EQ(global, 4);  // layers 5, 11, 17, 23 of 26
}
