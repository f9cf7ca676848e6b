// Qwen3-VL's decoders (model/qwen3vl.h: qwen3vl, qwen3vlmoe): the keys they load with, the engine
// against the naive reference on text and on embedding rows that carry deepstack slices at 3-D
// positions, what the deepstack slices change, the weights in their file's type, what the loader
// refuses, and llama.cpp's logits (committed fixtures, tests/data/qwen3vl). Image chunks on the
// reuse layer: tests/unit/vision/test_vl_chunks.cpp; text chunks: test_reuse.cpp (ReuseArch).
#include <gtest/gtest.h>

#include <xxhash.h>
#include <cmath>
#include <fstream>
#include <iterator>

#include "reuse/chunk_kv.h"
#include "support/gguf_copy.h"
#include "support/naive_forward.h"
#include "support/quant_data.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

const char* const kArchs[] = {"qwen3vl", "qwen3vlmoe"};

// n rows of input_width values: row r, value j = 0.5 sin(0.37 r + 0.011 j (1 + j % 7)) (the same
// formula the llama.cpp fixture's program fed its decoder)
std::vector<float> synthetic_rows(int n, int width) {
  std::vector<float> e(size_t(n) * width);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < width; ++j)
      e[size_t(r) * width + j] =
          0.5f * std::sin(0.37f * float(r) + 0.011f * float(j) * float(1 + j % 7));
  return e;
}

// Every position's logits of [ids_a][rows at a grid_w-wide grid from position |ids_a|][ids_b]
// (the rows at t = p, h = p + r / grid_w, w = p + r % grid_w; ids_b from p + max side), one
// forward per piece.
std::vector<float> engine_pieces(const Model& m, const std::vector<int32_t>& a,
                                 const std::vector<float>& rows, int grid_w,
                                 const std::vector<int32_t>& b) {
  const int n = int(rows.size() / size_t(m.cfg.input_width())), grid_h = (n + grid_w - 1) / grid_w;
  auto pool = tiny::pool_for(m, int(a.size() + b.size()) + n + 32);
  Engine e(m, 2);
  const SeqId s = pool->create_sequence();
  ForwardOptions o;
  o.logits = LogitsMode::All;
  std::vector<float> out;
  const int32_t p = int32_t(a.size()), q = p + std::max(grid_w, grid_h);
  auto ra =
      e.forward(*pool, s, ForwardInput::from_tokens(a, tiny::linear_positions(int(a.size()))), o);
  std::vector<Pos> pos;
  for (int r = 0; r < n; ++r) pos.push_back({p, p + r / grid_w, p + r % grid_w});
  ForwardInput in;
  in.embeddings = rows.data();
  in.n = n;
  in.positions = pos;
  auto ri = e.forward(*pool, s, in, o);
  auto rb = e.forward(*pool, s,
                      ForwardInput::from_tokens(b, tiny::linear_positions(int(b.size()), q)), o);
  EXPECT_TRUE(ra.ok() && ri.ok() && rb.ok());
  if (!ra.ok() || !ri.ok() || !rb.ok()) return {};
  for (const auto* r : {&*ra, &*ri, &*rb}) out.insert(out.end(), r->begin(), r->end());
  return out;
}

// The same through the naive forward: the text rows as token embeddings with zero deepstack
// slices (what llama.cpp pads them with).
std::vector<float> naive_pieces(const Model& m, const std::vector<int32_t>& a,
                                const std::vector<float>& rows, int grid_w,
                                const std::vector<int32_t>& b) {
  const int iw = m.cfg.input_width(), d = m.cfg.dim;
  const int n = int(rows.size() / size_t(iw)), grid_h = (n + grid_w - 1) / grid_w;
  const int32_t p = int32_t(a.size()), q = p + std::max(grid_w, grid_h);
  std::vector<float> all;
  std::vector<Pos> pos;
  const std::vector<float> E = m.tok_embd.to_f32();
  auto text = [&](const std::vector<int32_t>& ids, int32_t start) {
    for (size_t i = 0; i < ids.size(); ++i) {
      const size_t at = all.size();
      all.resize(at + size_t(iw), 0.0f);
      std::copy_n(E.begin() + size_t(ids[i]) * d, d, all.begin() + std::ptrdiff_t(at));
      pos.push_back(Pos::linear(start + int32_t(i)));
    }
  };
  text(a, 0);
  all.insert(all.end(), rows.begin(), rows.end());
  for (int r = 0; r < n; ++r) pos.push_back({p, p + r / grid_w, p + r % grid_w});
  text(b, q);
  std::vector<std::vector<float>> per;
  naive::forward_3d(m, {}, pos, &per, nullptr, &all);
  std::vector<float> out;
  for (const auto& l : per) out.insert(out.end(), l.begin(), l.end());
  return out;
}

double max_abs(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s = std::max(s, double(std::fabs(x)));
  return s;
}

}  // namespace

// The tiny files: interleaved sections [6, 5, 5] (read from rope.dimension_sections, no kamera
// key), 2 deepstack layers, rows of 3 x 64 values; the features `kamera info -m` lists.
TEST(Qwen3Vl, LoadsWithInterleavedSectionsAndDeepstack) {
  for (const char* arch : kArchs) {
    SCOPED_TRACE(arch);
    auto m = tiny::load(tiny::model_path(arch));
    ASSERT_TRUE(m);
    const ModelConfig& c = m->cfg;
    EXPECT_EQ(std::string(arch_name(c.arch)), arch);
    EXPECT_EQ(c.rope.mrope, MropeMode::Interleaved);
    EXPECT_EQ(c.rope.sections, (std::array<int, 4>{6, 5, 5, 0}));
    EXPECT_EQ(c.n_deepstack, 2);
    EXPECT_EQ(c.input_width(), 3 * c.dim);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_EQ(c.moe.enabled(), std::string(arch) == "qwen3vlmoe");
    auto f = GgufFile::open(m->source);
    ASSERT_TRUE(f.ok());
    EXPECT_FALSE((*f)->has(std::string(arch) + ".rope.mrope_interleaved"));
    EXPECT_EQ((*f)->get_int(std::string(arch) + ".n_deepstack_layers").value_or(-1), 2);
    const auto feats = model_features(c);
    EXPECT_NE(std::find(feats.begin(), feats.end(), "mrope (interleaved)"), feats.end());
    EXPECT_NE(std::find_if(feats.begin(), feats.end(),
                           [](const std::string& s) { return s.starts_with("deepstack (2"); }),
              feats.end());
  }
  // the real shapes: Qwen3-VL-2B's decoder holds 1.72e9 weights (tied embedding)
  const int64_t q2b = count_parameters(*synthetic_preset(Arch::Qwen3Vl, "2b"));
  EXPECT_GT(q2b, int64_t(1.70e9));
  EXPECT_LT(q2b, int64_t(1.74e9));
  // [24, 20, 20] over 64 pairs leaves 2 pairs llama.cpp reads as its 4th component: make-model
  // says so; the tiny sections leave none
  EXPECT_EQ(llama_cpp_incompatibilities(*synthetic_preset(Arch::Qwen3Vl, "2b")).size(), 1u);
  EXPECT_TRUE(llama_cpp_incompatibilities(*synthetic_preset(Arch::Qwen3Vl, "tiny")).empty());
}

// Text and embedding rows with deepstack slices at 3-D positions, every position, against the
// naive double-precision forward (which adds slice l + 1 after layer l as written in
// model/qwen3vl.h).
TEST(Qwen3Vl, ForwardMatchesNaiveWithDeepstackRows) {
  for (const char* arch : kArchs) {
    SCOPED_TRACE(arch);
    auto m = tiny::load(tiny::model_path(arch));
    ASSERT_TRUE(m);
    const std::vector<int32_t> a = {1, 45, 67, 508}, b = {509, 77, 88, 99, 3};
    const auto rows = synthetic_rows(12, m->cfg.input_width());  // a 3 x 4 grid
    const auto got = engine_pieces(*m, a, rows, 4, b);
    const auto want = naive_pieces(*m, a, rows, 4, b);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LT(tiny::max_abs_diff(got, want), 1e-4 * std::max(1.0, max_abs(want)));
    // text alone: prefill of every position as the naive forward
    const auto ids = tiny::random_tokens(20, m->cfg.n_vocab, 3);
    EXPECT_LT(tiny::max_abs_diff(tiny::prefill_all(*m, ids, 512), naive::logits_from_zero(*m, ids)),
              1e-4 * std::max(1.0, max_abs(naive::logits_from_zero(*m, ids))));
  }
}

// What a slice changes: zero slices equal token rows fed as embeddings (bit for bit); slice 2
// enters after layer 1, so the rows' layer-1 keys are the same with or without it and their
// layer-2 keys differ; a slice beyond n_deepstack would be a wider row, refused.
TEST(Qwen3Vl, EachDeepstackSliceEntersAfterItsLayer) {
  auto m = tiny::load(tiny::model_path("qwen3vl"));
  ASSERT_TRUE(m);
  const ModelConfig& c = m->cfg;
  const int d = c.dim, iw = c.input_width(), n = 6;
  const auto ids = tiny::random_tokens(n, c.n_vocab, 8);
  std::vector<float> rows(size_t(n) * iw, 0.0f);
  const std::vector<float> E = m->tok_embd.to_f32();
  for (int i = 0; i < n; ++i)
    std::copy_n(E.begin() + size_t(ids[i]) * d, d, rows.begin() + size_t(i) * iw);
  auto run = [&](const std::vector<float>& r) {
    auto pool = tiny::pool_for(*m, 32);
    Engine e(*m, 2);
    const SeqId s = pool->create_sequence();
    ForwardOptions o;
    o.logits = LogitsMode::All;
    ForwardInput in;
    in.embeddings = r.data();
    in.n = n;
    const auto pos = tiny::linear_positions(n);
    in.positions = pos;
    auto l = e.forward(*pool, s, in, o);
    EXPECT_TRUE(l.ok()) << l.message();
    std::vector<std::vector<float>> keys;
    const ChunkKV kv = read_chunk_kv(*pool, s, 0, n);
    for (int layer = 0; layer < c.n_layers; ++layer) {
      keys.emplace_back(size_t(n) * c.kv_width());
      for (int i = 0; i < n; ++i)
        kv.at(layer, 0).get_row(i, &keys.back()[size_t(i) * c.kv_width()]);
    }
    return std::make_pair(*l, keys);
  };
  const auto [zero_logits, zero_keys] = run(rows);
  EXPECT_EQ(zero_logits, tiny::prefill_all(*m, ids, 512));
  std::vector<float> with2 = rows;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j)
      with2[size_t(i) * iw + 2 * d + j] = 0.3f * std::cos(0.1f * float(i * d + j));
  const auto [logits2, keys2] = run(with2);
  EXPECT_EQ(keys2[0], zero_keys[0]);
  EXPECT_EQ(keys2[1], zero_keys[1]);
  EXPECT_GT(tiny::max_abs_diff(keys2[2], zero_keys[2]), 1e-3);
  EXPECT_GT(tiny::max_abs_diff(logits2, zero_logits), 1e-3);
  ChunkContent wide;
  wide.dim = d * 4;
  wide.embeddings.assign(size_t(n) * wide.dim, 0.0f);
  wide.layout = tiny::linear_positions(n);
  EXPECT_FALSE(wide.validate(c.n_vocab, c.input_width()).ok());
}

// F16 and Q8_0 files run in their type and match the naive forward on the same weights.
TEST(Qwen3Vl, WeightsInTheirFileType) {
  for (const char* arch : kArchs)
    for (DType type : {DType::F16, DType::Q8_0}) {
      SCOPED_TRACE(std::string(arch) + " " + std::string(dtype_name(type)));
      auto m = tiny::load(tiny::model_path(arch, type));
      ASSERT_TRUE(m);
      EXPECT_EQ(m->layers[0].wq.type(), type == DType::F16 ? GgmlType::F16 : GgmlType::Q8_0);
      const std::vector<int32_t> a = {1, 2}, b = {3, 4};
      const auto rows = synthetic_rows(4, m->cfg.input_width());
      const auto got = engine_pieces(*m, a, rows, 2, b);
      const auto want = naive_pieces(*m, a, rows, 2, b);
      const std::vector<float> last(got.end() - m->cfg.n_vocab, got.end());
      const std::vector<float> wlast(want.end() - m->cfg.n_vocab, want.end());
      EXPECT_LT(quant_data::nmse(last.data(), wlast.data(), int64_t(wlast.size())), 1e-3);
    }
}

TEST(Qwen3Vl, RefusesWhatItDoesNotRun) {
  const std::string dst = unique_temp("kamera-qwen3vl-refused.gguf");
  tiny::copy_gguf(tiny::model_path("qwen3vl"), dst, [](GgufWriter& w) {
    w.set_i32_array("qwen3vl.deepstack_mapping", {0, 1, -1});
  });
  auto a = load_model(dst);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.code(), ErrorCode::Unsupported);
  EXPECT_NE(a.message().find("deepstack_mapping"), std::string::npos) << a.message();
  tiny::copy_gguf(tiny::model_path("qwen3vl"), dst,
                  [](GgufWriter& w) { w.set_u32("qwen3vl.n_deepstack_layers", 4); });
  auto b = load_model(dst);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.message().find("n_deepstack_layers"), std::string::npos) << b.message();
  tiny::copy_gguf(tiny::model_path("qwen3vlmoe"), dst,
                  [](GgufWriter& w) { w.set_u32("qwen3vlmoe.expert_shared_count", 1); });
  auto c = load_model(dst);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("expert_shared_count"), std::string::npos) << c.message();
  tiny::copy_gguf(tiny::model_path("qwen3vl"), dst, [](GgufWriter&) {});
  EXPECT_TRUE(load_model(dst).ok());  // the unchanged copy loads
}

// llama.cpp (unslothai d32676d, CPU, f32 KV) loaded tiny qwen3vl and qwen3vlmoe files; its logits
// at every position are committed (tests/data/qwen3vl/README.md says how they were made): token
// sequences ("cases"), and [text][embedding rows with deepstack slices at 2-D positions][text]
// ("rows": the rows written by the formula of synthetic_rows, llama.cpp's positions
// (t, t + r / grid_w, t + r % grid_w, 0)). The files are regenerated from their make-model
// arguments; their bytes must hash as they did.
TEST(Qwen3Vl, LogitsMatchLlamaCpp) {
  const std::string dir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen3vl/";
  const auto manifest = tiny::llama_cpp_manifest(dir);
  ASSERT_GE(manifest["cases"].size(), 3u);
  ASSERT_GE(manifest["rows"].size(), 2u);
  auto spec_of = [](const nlohmann::json& c) {
    const std::string arch = c["arch"], dims = c["dims"];
    SyntheticSpec spec;
    spec.cfg = *synthetic_preset(*arch_from_name(arch), "tiny");
    EXPECT_TRUE(apply_dims(spec.cfg, dims).ok());
    spec.seed = c["seed"];
    spec.name = fmt::format("kamera-synthetic-{}-tiny-seed{}", arch, spec.seed);
    return spec;
  };
  for (const auto& c : manifest["cases"]) {
    SCOPED_TRACE(c.dump());
    const SyntheticSpec spec = spec_of(c);
    std::printf("%s seed %d dims '%s': max |kamera - llama.cpp| / max |logit| = %.2e\n",
                arch_name(spec.cfg.arch), int(spec.seed), c["dims"].get<std::string>().c_str(),
                tiny::check_llama_cpp_case(spec, c, dir));
  }
  for (const auto& c : manifest["rows"]) {
    SCOPED_TRACE(c.dump());
    const SyntheticSpec spec = spec_of(c);
    const std::string path = unique_temp("kamera-qwen3vl-rows.gguf");
    ASSERT_TRUE(write_synthetic_gguf(spec, path).ok());
    std::ifstream gf(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(gf)), {});
    EXPECT_EQ(fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size())),
              c["xxh3_64"].get<std::string>());
    auto m = tiny::load(path);
    ASSERT_TRUE(m);
    const std::vector<int32_t> a = c["tokens_a"], b = c["tokens_b"];
    const int n = c["n_rows"], gw = c["grid_w"];
    const auto got = engine_pieces(*m, a, synthetic_rows(n, m->cfg.input_width()), gw, b);
    std::ifstream lf(dir + c["logits"].get<std::string>(), std::ios::binary);
    std::vector<float> want(got.size());
    lf.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * 4));
    ASSERT_TRUE(lf) << "short logits file";
    const double rel = tiny::max_abs_diff(got, want) / max_abs(want);
    std::printf("%s rows: max |kamera - llama.cpp| / max |logit| = %.2e\n", arch_name(m->cfg.arch),
                rel);
    EXPECT_LT(rel, 1e-4);
    // the slices matter at that scale: without them kamera would be far off
    auto flat = synthetic_rows(n, m->cfg.input_width());
    for (int r = 0; r < n; ++r)
      std::fill_n(flat.begin() + size_t(r) * m->cfg.input_width() + m->cfg.dim,
                  m->cfg.input_width() - m->cfg.dim, 0.0f);
    EXPECT_GT(tiny::max_abs_diff(engine_pieces(*m, a, flat, gw, b), want) / max_abs(want), 1e-2);
  }
}
