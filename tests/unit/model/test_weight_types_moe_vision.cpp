// The MoE experts (model/moe.h) and the Qwen2-VL vision tower (vision/qwen_vision.h) keep their
// weights in the file's type and multiply through the quantized kernels: for F16, Q8_0 and Q4_K,
// each agrees with the same computation on the same weights widened to f32 (NMSE bounds); decode
// reads only the routed experts' bytes; a row's MoE result does not depend on the batch order;
// the loaded weights are the file's tensor bytes (same type, same size, borrowed from the mapping
// for the decoder), not 4 bytes per weight.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "model/moe.h"
#include "support/naive_forward.h"
#include "support/quant_data.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "vision/qwen_vision_encoder.h"

using namespace kamera;

namespace {

// One matrix of random weights of type t (every bit pattern the type can hold, realistic scales).
Weight random_weight(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<uint8_t> bytes = quant_data::random_rows(t, rows, cols, seed);
  auto v = make_weight_view(t, bytes.data(), rows, cols);
  EXPECT_TRUE(v.ok()) << v.message();
  return Weight::copy_of(*v);  // owned: bytes dies here
}

// The same values in f32 (the reference's weights).
Weight widened(const Weight& w) {
  return w.empty() ? Weight() : Weight::from_f32(w.to_f32(), w.rows(), w.cols());
}

struct TypeCase {
  GgmlType type;
  // NMSE bounds per path, about 4x above what this host measures (AVX-512 + AMX). Decode (up to
  // kQuantDecodeMaxRows rows) and, for quantized types, prefill too quantize each activation row
  // to the type's 8-bit dot type (ops/quant.h, as ggml at every batch size): per 32 values for
  // Q8_0 (the kernel layer's own bound is 3e-4 a product), per 256 for Q4_K's q8_K (1.5e-3 a
  // product: one outlier sets the step of 256 values); F16 dots in f32. F16's prefill multiplies
  // dequantized panels, bf16 on bf16 CPUs (about 1e-5 a product). Three products in a row
  // (SwiGLU; the tower's blocks) compound them: the qwen25vl tower's 48 Q4_K rows measure 5.2e-3
  // (its prefill bound 2e-2). A wrong expert slice or a misread type gives an NMSE near 1.
  double decode_max, prefill_max;
};

const TypeCase kTypes[] = {
    {GgmlType::F16, 1e-9, 1e-4}, {GgmlType::Q8_0, 1.5e-3, 1.5e-3}, {GgmlType::Q4_K, 7.5e-3, 2e-2}};

double bound(const TypeCase& tc, int64_t rows) {
  return rows <= kQuantDecodeMaxRows ? tc.decode_max : tc.prefill_max;
}

// ---- MoE ----

MoeConfig moe_config() {
  MoeConfig c;
  c.n_experts = 6;
  c.n_used = 2;
  c.n_shared = 1;
  c.expert_ffn = 256;  // Q4_K rows are whole 256-value blocks
  c.n_dense_lead = 0;
  c.norm_weights = true;
  c.weights_scale = 1.5f;
  return c;
}
constexpr int kDim = 256;

// Experts in type t; the router F32 (as llama.cpp's converter writes it), so routing is exact.
MoeWeights moe_weights(const MoeConfig& c, GgmlType t) {
  const int d = kDim, E = c.n_experts, F = c.expert_ffn, S = c.shared_ffn();
  MoeWeights w;
  w.router = random_weight(GgmlType::F32, E, d, 1);
  w.gate_exps = random_weight(t, int64_t(E) * F, d, 2);
  w.up_exps = random_weight(t, int64_t(E) * F, d, 3);
  w.down_exps = random_weight(t, int64_t(E) * d, F, 4);
  w.gate_shexp = random_weight(t, S, d, 5);
  w.up_shexp = random_weight(t, S, d, 6);
  w.down_shexp = random_weight(t, d, S, 7);
  return w;
}

MoeWeights widened(const MoeWeights& w) {
  MoeWeights f;
  f.router = widened(w.router);
  f.gate_exps = widened(w.gate_exps);
  f.up_exps = widened(w.up_exps);
  f.down_exps = widened(w.down_exps);
  f.gate_shexp = widened(w.gate_shexp);
  f.up_shexp = widened(w.up_shexp);
  f.down_shexp = widened(w.down_shexp);
  return f;
}

std::vector<float> run_moe(const MoeConfig& c, const MoeWeights& w, const std::vector<float>& x,
                           ThreadPool& pool) {
  const int n = int(x.size() / kDim);
  std::vector<float> out(x.size());
  MoeWorkspace ws;
  moe_ffn(c, w, kDim, x.data(), n, out.data(), ws, pool);
  return out;
}

class MoeWeightTypes : public testing::TestWithParam<TypeCase> {};

TEST_P(MoeWeightTypes, AgreesWithTheWidenedF32Layer) {
  const TypeCase tc = GetParam();
  const MoeConfig c = moe_config();
  const MoeWeights q = moe_weights(c, tc.type);
  const MoeWeights f = widened(q);
  ASSERT_EQ(q.gate_exps.type(), tc.type);
  ASSERT_TRUE(f.gate_exps.is_f32());
  ThreadPool pool(2);
  // 1 row (decode: integer dots), 3 (still decode), 40 (prefill: dequantized panels for the
  // shared experts and the experts given more than 4 rows)
  for (int n : {1, 3, 40}) {
    SCOPED_TRACE(n);
    const std::vector<float> x = quant_data::random_activations(int64_t(n) * kDim, 10 + n);
    const std::vector<float> got = run_moe(c, q, x, pool), want = run_moe(c, f, x, pool);
    const double e = quant_data::nmse(got.data(), want.data(), int64_t(got.size()));
    std::printf("%s n=%d: NMSE %.2e\n", std::string(ggml_type_name(tc.type)).c_str(), n, e);
    EXPECT_LT(e,
              n <= kQuantDecodeMaxRows ? tc.decode_max : std::max(tc.decode_max, tc.prefill_max));
    EXPECT_GT(
        quant_data::nmse(got.data(), std::vector<float>(got.size()).data(), int64_t(got.size())),
        0.0);  // not all zero
  }
}

// Decode reads only its n_used experts: every other expert's bytes set to NaN patterns changes
// nothing (a read of them would make the row NaN).
TEST_P(MoeWeightTypes, DecodeReadsOnlyTheRoutedExperts) {
  const TypeCase tc = GetParam();
  const MoeConfig c = moe_config();
  const MoeWeights q = moe_weights(c, tc.type);
  ThreadPool pool(2);
  const std::vector<float> x = quant_data::random_activations(kDim, 77);
  // the routing, from the f32 router
  std::vector<float> probs(size_t(c.n_experts));
  linear(q.router, x.data(), 1, nullptr, probs.data(), pool);
  float mx = *std::max_element(probs.begin(), probs.end()), sum = 0;
  for (float& p : probs) sum += p = std::exp(p - mx);
  for (float& p : probs) p /= sum;
  std::vector<int32_t> ids(size_t(c.n_used));
  std::vector<float> wts(size_t(c.n_used));
  moe_route(c, probs.data(), ids.data(), wts.data());
  MoeWeights poisoned = q;
  for (Weight* w : {&poisoned.gate_exps, &poisoned.up_exps, &poisoned.down_exps}) {
    std::vector<uint8_t> bytes(w->raw(), w->raw() + w->bytes());
    const size_t per = w->bytes() / size_t(c.n_experts);
    for (int e = 0; e < c.n_experts; ++e)
      if (std::find(ids.begin(), ids.end(), e) == ids.end())
        std::memset(bytes.data() + size_t(e) * per, 0xff, per);  // NaN scales and values
    auto v = make_weight_view(w->type(), bytes.data(), w->rows(), w->cols());
    ASSERT_TRUE(v.ok());
    *w = Weight::copy_of(*v);
  }
  const std::vector<float> clean = run_moe(c, q, x, pool), dirty = run_moe(c, poisoned, x, pool);
  for (size_t i = 0; i < clean.size(); ++i) ASSERT_EQ(clean[i], dirty[i]) << i;
}

// Rows grouped by expert: permuting the batch permutes the result rows, bit for bit.
TEST_P(MoeWeightTypes, ARowDoesNotDependOnBatchOrder) {
  const TypeCase tc = GetParam();
  const MoeConfig c = moe_config();
  const MoeWeights q = moe_weights(c, tc.type);
  ThreadPool pool(2);
  const int n = 24;
  const std::vector<float> x = quant_data::random_activations(int64_t(n) * kDim, 5);
  std::vector<int> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(3));
  std::vector<float> xp(x.size());
  for (int r = 0; r < n; ++r)
    std::copy_n(x.data() + size_t(perm[r]) * kDim, kDim, xp.data() + size_t(r) * kDim);
  const std::vector<float> a = run_moe(c, q, x, pool), b = run_moe(c, q, xp, pool);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < kDim; ++j)
      ASSERT_EQ(b[size_t(r) * kDim + j], a[size_t(perm[r]) * kDim + j]) << "row " << r;
}

INSTANTIATE_TEST_SUITE_P(Types, MoeWeightTypes, testing::ValuesIn(kTypes),
                         [](const testing::TestParamInfo<TypeCase>& i) {
                           return std::string(ggml_type_name(i.param.type));
                         });

// A MoE GGUF in F16 / Q8_0: every expert, shared-expert and router matrix is the file's tensor
// (its type, its bytes, in place in the mapping), and the forward matches the naive reference on
// the same (dequantized) weights.
TEST(MoeWeightTypesGguf, ExpertsStayInTheFileAndMatchTheNaiveForward) {
  for (DType type : {DType::F16, DType::Q8_0}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const std::string path = tiny::model_path("deepseek2:tiny-moe", type);
    auto m = tiny::load(path);
    ASSERT_TRUE(m);
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok());
    size_t moe_bytes = 0, file_bytes = 0;
    int quantized = 0;
    for (const LayerWeights& l : m->layers) {
      const std::string p = fmt::format("blk.{}.", &l - m->layers.data());
      l.moe.for_each([&](const char* name, const Weight& w) {
        const GgufTensor* t = (*f)->find_tensor(p + name + ".weight");
        if (w.empty()) {
          EXPECT_EQ(t, nullptr) << name;
          return;
        }
        ASSERT_NE(t, nullptr) << name;
        EXPECT_EQ(w.type(), t->type) << name;
        EXPECT_EQ(w.bytes(), t->nbytes) << name;
        EXPECT_FALSE(w.owned()) << name << " was copied out of the mapping";
        quantized += w.type() != GgmlType::F32;
        moe_bytes += w.bytes();
        file_bytes += t->nbytes;
      });
    }
    EXPECT_GT(quantized, 0);
    EXPECT_EQ(moe_bytes, file_bytes);
    // every matrix the model holds, in the file's bytes (attn_kv_b is held in f32 on purpose)
    size_t held = 0, want = 0;
    m->for_each_weight([&](const std::string& name, const Weight& w) {
      if (name.find("attn_kv_b") != std::string::npos) return;
      held += w.bytes();
      want += (*f)->find_tensor(name)->nbytes;
    });
    EXPECT_EQ(held, want);
    // the engine against the naive forward over the dequantized weights
    const int n = 12;
    auto ids = tiny::random_tokens(n, m->cfg.n_vocab, 4);
    auto pool = tiny::pool_for(*m, 64);
    Engine e(*m, 2);
    const SeqId s = pool->create_sequence();
    auto pos = tiny::linear_positions(n);
    auto r = e.forward(*pool, s, ForwardInput::from_tokens(ids, pos));
    ASSERT_TRUE(r.ok()) << r.message();
    std::vector<int> pv(static_cast<size_t>(n));
    std::iota(pv.begin(), pv.end(), 0);
    const std::vector<float> want_logits =
        naive::forward_all(*m, std::vector<int>(ids.begin(), ids.end()), pv);
    const double err = quant_data::nmse(r->data(), want_logits.data(), int64_t(want_logits.size()));
    std::printf("%s tiny-moe logits NMSE vs naive %.2e\n", std::string(dtype_name(type)).c_str(),
                err);
    EXPECT_LT(err, 1e-3);  // the dense products too run the quantized kernels (bf16 panels)
  }
}

// ---- the vision tower ----

// A tower whose every product's input width is whole Q4_K blocks (256).
QwenVisionConfig tower_config(const char* arch) {
  QwenVisionConfig c = *qwen_vision_preset(arch, "tiny");
  c.dim = 256;
  c.n_heads = 4;
  c.ffn_dim = 256;
  c.out_dim = 256;
  c.n_layers = 2;
  return c;
}

// The tower with its attention, FFN and merger matrices replaced by random weights of type t.
QwenVisionModel tower_of_type(const QwenVisionConfig& c, GgmlType t) {
  QwenVisionModel m = QwenVisionModel::random(c, 3);
  uint32_t seed = 100;
  auto swap = [&](QwenLinear& l) {
    if (!l.w.empty()) l.w = random_weight(t, l.out, l.in, seed++);
  };
  for (auto& L : m.w.layers)
    for (QwenLinear* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) swap(*l);
  swap(m.w.mm0);
  swap(m.w.mm2);
  m.finish();
  return m;
}

QwenVisionModel widened(const QwenVisionModel& q) {
  QwenVisionModel f = q;
  for (auto& L : f.w.layers)
    for (QwenLinear* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) l->w = widened(l->w);
  f.w.mm0.w = widened(f.w.mm0.w);
  f.w.mm2.w = widened(f.w.mm2.w);
  f.finish();
  return f;
}

QwenPatches random_patches(int grid_h, int grid_w, int values, uint32_t seed) {
  QwenPatches p;
  p.grid_t = 1;
  p.grid_h = grid_h;
  p.grid_w = grid_w;
  p.patch_values = values;
  p.values = quant_data::random_activations(p.n_patches() * values, seed);
  for (float& v : p.values) v *= 0.5f;
  return p;
}

class QwenVisionWeightTypes : public testing::TestWithParam<TypeCase> {};

TEST_P(QwenVisionWeightTypes, TowerAgreesWithTheWidenedF32Tower) {
  const TypeCase tc = GetParam();
  ThreadPool pool(2);
  for (const char* arch : {"qwen2vl", "qwen25vl"}) {
    SCOPED_TRACE(arch);
    const QwenVisionConfig c = tower_config(arch);
    const QwenVisionModel q = tower_of_type(c, tc.type);
    const QwenVisionModel f = widened(q);
    ASSERT_EQ(q.w.layers[0].q.w.type(), tc.type);
    EXPECT_NE(q.fingerprint, f.fingerprint);
    // 2 x 2 patches (4 rows: the decode kernels) and 8 x 6 (48 rows: the prefill GEMM)
    for (auto [h, w] : {std::pair{2, 2}, std::pair{8, 6}}) {
      const QwenPatches p = random_patches(h, w, c.patch_values(), uint32_t(h * w));
      auto a = QwenVisionEncoder(q, &pool).encode(p);
      auto b = QwenVisionEncoder(f, &pool).encode(p);
      ASSERT_TRUE(a.ok() && b.ok());
      const double e = quant_data::nmse(a->rows.data(), b->rows.data(), int64_t(b->rows.size()));
      std::printf("%s %s %dx%d: NMSE %.2e\n", arch, std::string(ggml_type_name(tc.type)).c_str(), h,
                  w, e);
      EXPECT_LT(e, bound(tc, int64_t(h) * w));  // 2 x 2: decode (4 rows, the merger 1)
    }
    // a null pool runs the quantized kernels on the calling thread, same result
    const QwenPatches p = random_patches(4, 4, c.patch_values(), 9);
    auto a = QwenVisionEncoder(q, &pool).encode(p);
    auto b = QwenVisionEncoder(q, nullptr).encode(p);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_LT(quant_data::nmse(b->rows.data(), a->rows.data(), int64_t(a->rows.size())), 1e-10);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QwenVisionWeightTypes, testing::ValuesIn(kTypes),
                         [](const testing::TestParamInfo<TypeCase>& i) {
                           return std::string(ggml_type_name(i.param.type));
                         });

// An mmproj written in F16 / Q8_0 loads with each product's matrix in the file's type and bytes,
// in place in the mapping (the patch kernels, norms and biases in f32).
TEST(QwenVisionWeightTypesGguf, MatricesKeepTheFileTypeAndBytes) {
  const QwenVisionModel m = QwenVisionModel::random(*qwen_vision_preset("qwen2vl", "tiny"), 4);
  const std::string path = unique_temp("kamera-wtype-tower.gguf");
  for (DType type : {DType::F16, DType::Q8_0}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    ASSERT_TRUE(m.write_gguf(path, type).ok());
    auto t = QwenVisionModel::load(path);
    ASSERT_TRUE(t.ok()) << t.message();
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok());
    const GgmlType want = type == DType::F16 ? GgmlType::F16 : GgmlType::Q8_0;
    size_t held = 0, file = 0;
    auto check = [&](const std::string& name, const QwenLinear& l) {
      const GgufTensor* g = (*f)->find_tensor(name + ".weight");
      ASSERT_NE(g, nullptr) << name;
      EXPECT_EQ(l.w.type(), want) << name;
      EXPECT_EQ(g->type, want) << name;
      EXPECT_EQ(l.w.bytes(), g->nbytes) << name;
      EXPECT_FALSE(l.w.owned()) << name << " was copied out of the mapping";
      held += l.w.bytes();
      file += g->nbytes;
    };
    for (int i = 0; i < m.cfg.n_layers; ++i) {
      const auto& L = t->w.layers[size_t(i)];
      const std::string b = fmt::format("v.blk.{}.", i);
      check(b + "attn_q", L.q);
      check(b + "attn_k", L.k);
      check(b + "attn_v", L.v);
      check(b + "attn_out", L.o);
      check(b + "ffn_down", L.up);  // llama.cpp's Qwen2-VL naming: ffn_down is the input side
      check(b + "ffn_up", L.down);
    }
    check("mm.0", t->w.mm0);
    check("mm.2", t->w.mm2);
    EXPECT_EQ(held, file);
    // everything else the tower holds in f32 is the patch matrix
    EXPECT_EQ(t->weight_bytes(), held + t->w.patch.w.bytes());
    EXPECT_EQ(t->w.patch.w.bytes(), size_t(m.cfg.dim) * m.cfg.patch_values() * sizeof(float));
  }
  std::filesystem::remove(path);
}

}  // namespace
