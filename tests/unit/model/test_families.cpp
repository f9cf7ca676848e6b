// The attention families beyond MHA/GQA: MLA (deepseek2) and M-RoPE (qwen2vl), each against the
// naive reference, plus the family-specific exactness properties.
#include <gtest/gtest.h>

#include <random>

#include "cache/chunk_cache.h"
#include "support/naive_forward.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

using tiny::random_tokens;

std::vector<float> engine_logits(const Model& m, const ForwardInput& in, LogitsMode mode) {
  auto pool = tiny::pool_for(m, in.n + 16);
  Engine e(m, 2);
  const SeqId s = pool->create_sequence();
  ForwardOptions o;
  o.logits = mode;
  auto r = e.forward(*pool, s, in, o);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : std::vector<float>{};
}

double max_diff_all(const std::vector<float>& got, const std::vector<std::vector<float>>& want) {
  std::vector<float> flat;
  for (const auto& w : want) flat.insert(flat.end(), w.begin(), w.end());
  return tiny::max_abs_diff(got, flat);
}

// An image-like chunk: rows x cols tokens of one frame, positions (t, h, w) = (0, r, c).
std::vector<Pos> grid_positions(int frames, int rows, int cols) {
  std::vector<Pos> p;
  for (int f = 0; f < frames; ++f)
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) p.push_back({f, r, c});
  return p;
}

}  // namespace

TEST(Families, MlaForwardMatchesExpandedNaive) {
  for (const std::string dims : {"", "q_lora=0"}) {  // q low-rank, and a plain q projection
    auto m = tiny::load(tiny::model_path("deepseek2", DType::F32, dims));
    ASSERT_TRUE(m);
    ASSERT_EQ(m->cfg.attention, AttentionKind::Mla);
    const int n = 30;
    auto ids = random_tokens(n, m->cfg.n_vocab, 1);
    auto pos = tiny::linear_positions(n);
    auto got = engine_logits(*m, ForwardInput::from_tokens(ids, pos), LogitsMode::All);
    std::vector<std::vector<float>> want;
    std::vector<int> ip(ids.begin(), ids.end());
    naive::forward_3d(*m, ip, pos, &want);
    EXPECT_LT(max_diff_all(got, want), 1e-4) << "dims '" << dims << "'";
    // decode path (one query at a time) agrees with the prefill
    auto pool = tiny::pool_for(*m, 64);
    Engine e(*m, 1);
    const SeqId s = pool->create_sequence();
    std::vector<float> last;
    for (int t = 0; t < n; ++t) {
      auto r = e.forward(*pool, s, ForwardInput::from_tokens({&ids[t], 1}, {&pos[t], 1}));
      ASSERT_TRUE(r.ok());
      last = *r;
    }
    EXPECT_LT(tiny::max_abs_diff(last, want.back()), 1e-4);
  }
}

TEST(Families, MlaCachesOnlyTheLatentAndTheRopeBand) {
  auto m = tiny::load(tiny::model_path("deepseek2"));
  ASSERT_TRUE(m);
  const KvLayout l = m->kv_layout();
  ASSERT_EQ(l.channels.size(), 2u);
  EXPECT_EQ(l.channels[0].name, "c_kv");
  EXPECT_FALSE(l.channels[0].rotated);
  EXPECT_EQ(l.channels[1].name, "k_pe");
  EXPECT_TRUE(l.channels[1].rotated);
  const size_t bytes_per_token = l.floats_per_token() * sizeof(float);
  EXPECT_EQ(bytes_per_token,
            size_t(m->cfg.n_layers) * (m->cfg.mla.kv_lora_rank + m->cfg.mla.qk_rope_dim) * 4);
  // versus what an expanded (MHA-style) cache of the same model would hold per token
  const size_t expanded =
      size_t(m->cfg.n_layers) * m->cfg.n_heads * (m->cfg.head_dim + m->cfg.mla.v_head_dim) * 4;
  EXPECT_LT(bytes_per_token, expanded);
}

TEST(Families, MropeForwardMatchesNaiveBothLayouts) {
  for (const std::string dims : {"", "mrope=interleaved"}) {
    auto m = tiny::load(tiny::model_path("qwen2vl", DType::F32, dims));
    ASSERT_TRUE(m);
    ASSERT_NE(m->cfg.rope.mrope, MropeMode::None);
    // text prefix, then a 2-frame 3x4 image grid as embedding rows, then text
    const int n_text = 5, frames = 2, rows = 3, cols = 4, n_img = frames * rows * cols;
    std::vector<Pos> pos;
    for (int i = 0; i < n_text; ++i) pos.push_back(Pos::linear(i));
    for (Pos p : grid_positions(frames, rows, cols)) pos.push_back(p.shifted(n_text));
    const int32_t after = n_text + std::max({frames, rows, cols});
    for (int i = 0; i < 3; ++i) pos.push_back(Pos::linear(after + i));
    const int n = int(pos.size());
    std::mt19937 rng(2);
    std::normal_distribution<float> nd(0.0f, 0.3f);
    auto ids = random_tokens(n, m->cfg.n_vocab, 3);
    std::vector<float> rows_in(size_t(n) * m->cfg.dim);
    const std::vector<float> embd = m->tok_embd.to_f32();
    for (int t = 0; t < n; ++t)
      for (int i = 0; i < m->cfg.dim; ++i)
        rows_in[size_t(t) * m->cfg.dim + i] =
            t >= n_text && t < n_text + n_img ? nd(rng) : embd[size_t(ids[t]) * m->cfg.dim + i];
    ForwardInput in;
    in.embeddings = rows_in.data();
    in.n = n;
    in.positions = pos;
    auto got = engine_logits(*m, in, LogitsMode::All);
    std::vector<std::vector<float>> want;
    naive::forward_3d(*m, {}, pos, &want, nullptr, &rows_in);
    EXPECT_LT(max_diff_all(got, want), 1e-4) << dims;
  }
}

// Text tokens (t = h = w) rotate exactly as 1-D NeoX RoPE: the qwen2vl file made from the same
// seed as the qwen2 one gives bit-identical logits on text.
TEST(Families, MropeOnTextIsOneDimensionalRope) {
  auto vl = tiny::load(tiny::model_path("qwen2vl"));
  auto q2 = tiny::load(tiny::model_path("qwen2"));
  ASSERT_TRUE(vl && q2);
  auto ids = random_tokens(20, q2->cfg.n_vocab, 4);
  auto pos = tiny::linear_positions(20, 7);
  EXPECT_EQ(engine_logits(*vl, ForwardInput::from_tokens(ids, pos), LogitsMode::All),
            engine_logits(*q2, ForwardInput::from_tokens(ids, pos), LogitsMode::All));
}

// Relocating an image-grid chunk by delta (t, h and w together) equals a fresh prefill at the
// shifted 3-D positions, for both section layouts.
TEST(Families, MropeRelocationEqualsFreshPrefillAtShiftedPositions) {
  for (const std::string dims : {"", "mrope=interleaved"}) {
    auto ctx =
        tiny::context(tiny::model_path("qwen2vl", DType::F32, dims), 400, 16, size_t(1) << 28, 2);
    ASSERT_TRUE(ctx);
    const Model* m = &ctx->model();
    KvPool* pool = &ctx->pool();
    ChunkCache& cc = ctx->cache();
    ChunkContent img;
    img.dim = m->cfg.dim;
    img.layout = grid_positions(1, 4, 5);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 0.3f);
    img.embeddings.resize(img.layout.size() * size_t(img.dim));
    for (auto& x : img.embeddings) x = nd(rng);
    EXPECT_EQ(img.extent(), 5);
    auto q = ChunkContent::from_tokens(random_tokens(4, m->cfg.n_vocab, 6));
    for (int32_t delta : {0, 9, 300}) {
      // served: canonical (formed right after BOS) placed at 1 + delta, BOS at delta
      ScopedSequence a(*pool);
      auto canon = cc.canonical(img);
      ASSERT_TRUE(canon.ok()) << canon.message();
      ASSERT_TRUE(cc.forward_chunk(a.id(), ChunkContent::from_tokens({1}), delta).ok());
      ASSERT_TRUE(cc.append_chunk(a.id(), **canon, nullptr, 1 + delta).ok());
      auto got = cc.forward_chunk(a.id(), q, 1 + delta + img.extent(), LogitsMode::All);
      // fresh prefill of the same thing at the shifted positions
      ScopedSequence b(*pool);
      ASSERT_TRUE(cc.forward_chunk(b.id(), ChunkContent::from_tokens({1}), delta).ok());
      ASSERT_TRUE(cc.forward_chunk(b.id(), img, 1 + delta).ok());
      auto want = cc.forward_chunk(b.id(), q, 1 + delta + img.extent(), LogitsMode::All);
      ASSERT_TRUE(got.ok() && want.ok());
      EXPECT_LT(tiny::max_abs_diff(*got, *want), 2e-5) << dims << " delta " << delta;
    }
  }
}
