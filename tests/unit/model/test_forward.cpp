// The engine's forward against the naive full-recompute reference, and its invariances:
// batching, embeddings input, positions as metadata, masks, forks, quantized weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "ops/quant.h"
#include "support/naive_forward.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

using tiny::random_tokens;

std::vector<float> run(Engine& e, KvPool& pool, SeqId seq, const std::vector<int32_t>& ids,
                       const std::vector<Pos>& pos, LogitsMode mode = LogitsMode::Last,
                       const AttentionMask* mask = nullptr, int max_batch = 512) {
  ForwardOptions o;
  o.logits = mode;
  o.mask = mask;
  o.max_batch = max_batch;
  auto r = e.forward(pool, seq, ForwardInput::from_tokens(ids, pos), o);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : std::vector<float>{};
}

class ForwardArch : public testing::TestWithParam<std::string> {};

}  // namespace

// Full prefill (GEMM attention path) against the naive reference, every position.
TEST_P(ForwardArch, PrefillMatchesNaive) {
  auto m = tiny::load(tiny::model_path(GetParam()));
  ASSERT_TRUE(m);
  auto ids = random_tokens(40, m->cfg.n_vocab, 1);
  auto pool = tiny::pool_for(*m, 64);
  Engine e(*m, 2);
  const SeqId s = pool->create_sequence();
  auto got = run(e, *pool, s, ids, tiny::linear_positions(40), LogitsMode::All);
  std::vector<std::vector<float>> want;
  std::vector<int> ip(ids.begin(), ids.end()), pp(40);
  for (int i = 0; i < 40; ++i) pp[i] = i;
  naive::forward_all(*m, ip, pp, &want);
  double worst = 0;
  for (int t = 0; t < 40; ++t)
    worst = std::max(worst, tiny::max_abs_diff({got.begin() + size_t(t) * m->cfg.n_vocab,
                                                got.begin() + size_t(t + 1) * m->cfg.n_vocab},
                                               want[t]));
  EXPECT_LT(worst, 1e-4);
}

// Token-by-token decode equals one prefill; micro-batching equals one batch.
TEST_P(ForwardArch, DecodeAndMicroBatchesEqualPrefill) {
  auto m = tiny::load(tiny::model_path(GetParam()));
  ASSERT_TRUE(m);
  const int n = 37, V = m->cfg.n_vocab;
  auto ids = random_tokens(n, V, 2);
  auto pos = tiny::linear_positions(n);
  auto pool = tiny::pool_for(*m, 3 * n);
  Engine e(*m, 2);
  const SeqId a = pool->create_sequence(), b = pool->create_sequence(), c = pool->create_sequence();
  auto full = run(e, *pool, a, ids, pos, LogitsMode::All);
  auto batched = run(e, *pool, c, ids, pos, LogitsMode::All, nullptr, /*max_batch=*/5);
  EXPECT_LT(tiny::max_abs_diff(full, batched), 1e-5);
  double worst = 0;
  for (int t = 0; t < n; ++t) {
    auto l = run(e, *pool, b, {ids[t]}, {pos[t]});
    worst = std::max(worst, tiny::max_abs_diff(l, {full.begin() + size_t(t) * V,
                                                   full.begin() + size_t(t + 1) * V}));
  }
  EXPECT_LT(worst, 1e-4);
  EXPECT_TRUE(pool->check_invariants().ok());
}

// Chunked prefill: a forward run in pieces batched into decode steps of another sequence (the
// server's fairness) gives the whole forward's logits and KV, and the decode rows are unchanged.
TEST_P(ForwardArch, PiecesBatchedWithDecodeStepsEqualOneForward) {
  auto m = tiny::load(tiny::model_path(GetParam()));
  ASSERT_TRUE(m);
  const int n = 41, V = m->cfg.n_vocab;
  auto ids = random_tokens(n, V, 4);
  auto pos = tiny::linear_positions(n);
  auto pool = tiny::pool_for(*m, 4 * n + 64);
  Engine e(*m, 2);
  const SeqId whole = pool->create_sequence(), pieced = pool->create_sequence();
  const SeqId dec_a = pool->create_sequence(), dec_b = pool->create_sequence();
  const auto ref = run(e, *pool, whole, ids, pos);
  auto prompt = random_tokens(6, V, 5);
  run(e, *pool, dec_a, prompt, tiny::linear_positions(6));
  run(e, *pool, dec_b, prompt, tiny::linear_positions(6));
  auto cur = e.begin_forward(*pool, pieced, ForwardInput::from_tokens(ids, pos));
  ASSERT_TRUE(cur.ok()) << cur.message();
  double worst_decode = 0;
  for (int step = 0; !cur->finished(); ++step) {
    const Engine::DecodeRow ra{dec_a, 7, Pos::linear(6 + step)},
        rb{dec_b, 7, Pos::linear(6 + step)};
    const Engine::Piece piece{&*cur, std::min(7, cur->left())};
    auto mixed = e.decode(*pool, {&ra, 1}, {&piece, 1});  // a, with the piece
    auto plain = e.decode(*pool, {&rb, 1});               // b, the same decode alone
    ASSERT_TRUE(mixed.ok() && plain.ok());
    ASSERT_EQ(mixed->size(), size_t(V));
    worst_decode = std::max(worst_decode, tiny::max_abs_diff(*mixed, *plain));
  }
  EXPECT_LT(worst_decode, 1e-5);
  EXPECT_LT(tiny::max_abs_diff(cur->logits, ref), 1e-5);
  double worst_kv = 0;
  const KvLayout& layout = pool->layout();
  for (int layer = 0; layer < m->cfg.n_layers; ++layer)
    for (int ch = 0; ch < int(layout.channels.size()); ++ch)
      for (int t = 0; t < n; ++t) {
        std::vector<float> a(size_t(layout.channels[size_t(ch)].width)), b(a.size());
        pool->read_row(whole, layer, ch, t, a.data());
        pool->read_row(pieced, layer, ch, t, b.data());
        worst_kv = std::max(worst_kv, tiny::max_abs_diff(a, b));
      }
  EXPECT_LT(worst_kv, 1e-5);
  EXPECT_TRUE(pool->check_invariants().ok());
}

// Caller-supplied embedding rows take the same path as token ids.
TEST_P(ForwardArch, EmbeddingRowsEqualTokenIds) {
  auto m = tiny::load(tiny::model_path(GetParam()));
  ASSERT_TRUE(m);
  const int n = 12, d = m->cfg.dim;
  auto ids = random_tokens(n, m->cfg.n_vocab, 3);
  std::vector<float> rows(size_t(n) * d);
  for (int t = 0; t < n; ++t) m->tok_embd.rows_f32(ids[t], 1, rows.data() + size_t(t) * d);
  auto pos = tiny::linear_positions(n);
  auto pool = tiny::pool_for(*m, 2 * n);
  Engine e(*m, 1);
  const SeqId a = pool->create_sequence(), b = pool->create_sequence();
  auto want = run(e, *pool, a, ids, pos);
  ForwardInput in;
  in.embeddings = rows.data();
  in.n = n;
  in.positions = pos;
  auto got = e.forward(*pool, b, in);
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(*got, want);
}

// A token's position is metadata: shifting every cached position by delta and querying at
// the shifted place gives the logits of a prefill made at the shifted positions (RoPE depends
// on relative positions only), without rewriting any cached byte.
TEST_P(ForwardArch, RelocatingPositionsEqualsPrefillAtNewPositions) {
  auto m = tiny::load(tiny::model_path(GetParam()));
  ASSERT_TRUE(m);
  const int n = 20, delta = 333;
  auto ids = random_tokens(n + 1, m->cfg.n_vocab, 4);
  std::vector<int32_t> prefix(ids.begin(), ids.end() - 1);
  auto pool = tiny::pool_for(*m, 4 * n);
  Engine e(*m, 2);
  const SeqId a = pool->create_sequence(), b = pool->create_sequence();
  run(e, *pool, a, prefix, tiny::linear_positions(n));
  for (int t = 0; t < n; ++t) pool->set_position(a, t, Pos::linear(t + delta));
  auto moved = run(e, *pool, a, {ids[n]}, {Pos::linear(n + delta)});
  run(e, *pool, b, prefix, tiny::linear_positions(n, delta));
  auto fresh = run(e, *pool, b, {ids[n]}, {Pos::linear(n + delta)});
  // Equal to f32 rounding: the prefixes ran at other absolute angles, so their later layers differ
  // in the last bits; ~2-3 ulps of the largest logit with every OpenBLAS kernel table.
  double scale = 0;
  for (float v : fresh) scale = std::max(scale, double(std::fabs(v)));
  EXPECT_LT(tiny::max_abs_diff(moved, fresh), 8 * std::numeric_limits<float>::epsilon() * scale);
  // and it matches the naive reference at those positions
  std::vector<int> ip(ids.begin(), ids.end()), pp(n + 1);
  for (int i = 0; i <= n; ++i) pp[i] = i + delta;
  EXPECT_LT(tiny::max_abs_diff(fresh, naive::forward_all(*m, ip, pp)), 1e-4);
}

// "B may not attend to A" in one forward: B's keys equal those of a prefill of [BOS] + B at
// the same positions, and the masked forward matches the naive reference with the same mask.
TEST_P(ForwardArch, MaskBlocksAntecedent) {
  auto m = tiny::load(tiny::model_path(GetParam()));
  ASSERT_TRUE(m);
  const int nA = 9, nB = 11, n = 1 + nA + nB;
  auto ids = random_tokens(n, m->cfg.n_vocab, 5);
  auto pos = tiny::linear_positions(n);
  auto pool = tiny::pool_for(*m, 4 * n);
  Engine e(*m, 2);
  const SeqId masked = pool->create_sequence(), solo = pool->create_sequence();
  AttentionMask mask;
  mask.blocks.push_back({1 + nA, n, 1, 1 + nA});  // B's queries may not see A's keys
  auto got = run(e, *pool, masked, ids, pos, LogitsMode::Last, &mask);
  std::vector<int32_t> solo_ids = {ids[0]};
  std::vector<Pos> solo_pos = {pos[0]};
  for (int i = 1 + nA; i < n; ++i) solo_ids.push_back(ids[i]), solo_pos.push_back(pos[i]);
  auto solo_logits = run(e, *pool, solo, solo_ids, solo_pos);
  EXPECT_LT(tiny::max_abs_diff(got, solo_logits), 1e-5);
  const int kch = 0, vch = 1, kvw = m->cfg.kv_width();
  double worst = 0;
  for (int l = 0; l < m->cfg.n_layers; ++l)
    for (int i = 0; i < nB; ++i)
      for (int ch : {kch, vch}) {
        const float* x = static_cast<const KvPool&>(*pool).row(masked, l, ch, 1 + nA + i);
        const float* y = static_cast<const KvPool&>(*pool).row(solo, l, ch, 1 + i);
        for (int j = 0; j < kvw; ++j) worst = std::max(worst, double(std::fabs(x[j] - y[j])));
      }
  EXPECT_LT(worst, 1e-5);
  std::vector<std::vector<bool>> hidden(n, std::vector<bool>(n, false));
  for (int q = 1 + nA; q < n; ++q)
    for (int k = 1; k < 1 + nA; ++k) hidden[q][k] = true;
  std::vector<int> ip(ids.begin(), ids.end()), pp(n);
  for (int i = 0; i < n; ++i) pp[i] = i;
  EXPECT_LT(tiny::max_abs_diff(got, naive::forward_all(*m, ip, pp, nullptr, &hidden)), 1e-4);
}

// Forks share the prompt copy-on-write; each branch continues as a fresh run would.
TEST_P(ForwardArch, ForkedBranchesMatchFreshRuns) {
  auto m = tiny::load(tiny::model_path(GetParam()));
  ASSERT_TRUE(m);
  auto ids = random_tokens(30, m->cfg.n_vocab, 6);
  std::vector<int32_t> prompt(ids.begin(), ids.begin() + 21);  // ends mid-page
  auto pool = tiny::pool_for(*m, 200);
  Engine e(*m, 2);
  const SeqId parent = pool->create_sequence();
  run(e, *pool, parent, prompt, tiny::linear_positions(21));
  auto child = pool->fork(parent);
  ASSERT_TRUE(child.ok());
  auto l_child = run(e, *pool, *child, {ids[25], ids[26]}, tiny::linear_positions(2, 21));
  auto l_parent = run(e, *pool, parent, {ids[21], ids[22]}, tiny::linear_positions(2, 21));
  const SeqId f1 = pool->create_sequence(), f2 = pool->create_sequence();
  std::vector<int32_t> p1 = prompt, p2 = prompt;
  p1.insert(p1.end(), {ids[25], ids[26]});
  p2.insert(p2.end(), {ids[21], ids[22]});
  EXPECT_LT(tiny::max_abs_diff(l_child, run(e, *pool, f1, p1, tiny::linear_positions(23))), 1e-5);
  EXPECT_LT(tiny::max_abs_diff(l_parent, run(e, *pool, f2, p2, tiny::linear_positions(23))), 1e-5);
  EXPECT_TRUE(pool->check_invariants().ok());
}

TEST_P(ForwardArch, BadInputFailsWithoutTouchingThePool) {
  auto m = tiny::load(tiny::model_path(GetParam()));
  ASSERT_TRUE(m);
  auto pool = tiny::pool_for(*m, 16, /*page_tokens=*/16);  // 4 + 1 pages
  Engine e(*m, 1);
  const SeqId s = pool->create_sequence();
  std::vector<int32_t> bad = {1, m->cfg.n_vocab};
  auto pos = tiny::linear_positions(2);
  auto r = e.forward(*pool, s, ForwardInput::from_tokens(bad, pos));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message().find("outside the vocabulary"), std::string::npos) << r.message();
  EXPECT_EQ(pool->n_tokens(s), 0);
  std::vector<int32_t> many(200, 5);
  auto r2 = e.forward(*pool, s, ForwardInput::from_tokens(many, tiny::linear_positions(200)));
  EXPECT_FALSE(r2.ok());  // pool full: recoverable
  EXPECT_EQ(pool->n_tokens(s), 0);
  EXPECT_EQ(pool->n_free_pages(), pool->n_pages());
  auto r3 = e.forward(*pool, s, ForwardInput::from_tokens(bad, tiny::linear_positions(1)));
  EXPECT_FALSE(r3.ok());
}

INSTANTIATE_TEST_SUITE_P(Archs, ForwardArch, testing::Values("llama", "qwen2"));

// Partial rotary and MHA shapes through the same code.
TEST(Forward, PartialRotaryAndMhaMatchNaive) {
  for (const std::string dims :
       {"rope_dims=8", "heads=4,kv_heads=4", "heads=8,kv_heads=1,head_dim=8"}) {
    auto m = tiny::load(tiny::model_path("qwen2", DType::F32, dims));
    ASSERT_TRUE(m);
    auto ids = random_tokens(17, m->cfg.n_vocab, 8);
    auto pool = tiny::pool_for(*m, 32);
    Engine e(*m, 2);
    const SeqId s = pool->create_sequence();
    auto got = run(e, *pool, s, ids, tiny::linear_positions(17));
    std::vector<int> ip(ids.begin(), ids.end()), pp(17);
    for (int i = 0; i < 17; ++i) pp[i] = i;
    EXPECT_LT(tiny::max_abs_diff(got, naive::forward_all(*m, ip, pp)), 1e-4) << dims;
  }
}

// Quantized files load to the dequantized weights and stay close to the f32 model.
TEST(Forward, QuantizedWeightsStayCloseToF32) {
  auto f32 = tiny::load(tiny::model_path("llama", DType::F32));
  ASSERT_TRUE(f32);
  auto ids = random_tokens(16, f32->cfg.n_vocab, 9);
  auto logits_of = [&](const Model& m) {
    auto pool = tiny::pool_for(m, 32);
    Engine e(m, 1);
    const SeqId s = pool->create_sequence();
    return run(e, *pool, s, ids, tiny::linear_positions(16));
  };
  const auto ref = logits_of(*f32);
  double scale = 0;
  for (float v : ref) scale = std::max(scale, double(std::fabs(v)));
  // F16 weights multiply in f16 precision, except where prefill runs on bf16 panels (AMX hosts):
  // there they carry bf16's rounding like a BF16 file.
  const bool bf16_prefill = kernel_path(GgmlType::F16).find("bf16") != std::string::npos;
  const double f16_tol = bf16_prefill ? 2e-2 : 2e-3;
  // Q8_0 weights repacked for the VNNI kernels also prefill through them, activations quantized to
  // q8_0 as in decode (and in llama.cpp): 3.7e-2 of the scale on this model (AVX-512 VNNI host),
  // against 3e-2 for dequantized f32 panels (KAMERA_PREFILL_X16=0 or KAMERA_REPACK=0).
  for (auto [type, tol] :
       {std::pair{DType::F16, f16_tol}, {DType::BF16, 2e-2}, {DType::Q8_0, 5e-2}}) {
    auto m = tiny::load(tiny::model_path("llama", type));
    ASSERT_TRUE(m);
    // weights equal the f32 weights rounded through the storage type
    std::vector<float> w = f32->layers[0].wq.to_f32(), back(w.size());
    std::vector<uint8_t> buf(dtype_row_bytes(type, int64_t(w.size())));
    quantize_row(type, w.data(), buf.data(), int64_t(w.size()));
    dequantize_row(type, buf.data(), back.data(), int64_t(w.size()));
    EXPECT_EQ(m->layers[0].wq.to_f32(), back) << dtype_name(type);
    EXPECT_EQ(m->layers[0].wq.type(), ggml_type_from_dtype(type)) << "held in the file's type";
    EXPECT_LT(tiny::max_abs_diff(logits_of(*m), ref) / scale, tol) << dtype_name(type);
  }
}

// One decode step of several sequences in one forward equals each sequence's own decode step.
TEST_P(ForwardArch, BatchedDecodeEqualsPerSequenceDecode) {
  auto m = tiny::load(tiny::model_path(GetParam()));
  ASSERT_TRUE(m);
  const int V = m->cfg.n_vocab;
  auto pool = tiny::pool_for(*m, 400);
  Engine e(*m, 2);
  std::vector<SeqId> a, b;
  std::vector<Engine::DecodeRow> rows;
  for (int s = 0; s < 3; ++s) {
    auto ids = random_tokens(5 + 7 * s, V, 20 + s);
    a.push_back(pool->create_sequence());
    b.push_back(pool->create_sequence());
    run(e, *pool, a.back(), ids, tiny::linear_positions(int(ids.size())));
    run(e, *pool, b.back(), ids, tiny::linear_positions(int(ids.size())));
    rows.push_back({a.back(), int32_t(3 + s), Pos::linear(int(ids.size()))});
  }
  auto batched = e.decode(*pool, rows);
  ASSERT_TRUE(batched.ok()) << batched.message();
  ASSERT_EQ(batched->size(), size_t(3) * V);
  for (int s = 0; s < 3; ++s) {
    auto one = run(e, *pool, b[s], {rows[s].token}, {rows[s].pos});
    EXPECT_LT(tiny::max_abs_diff(
                  one, {batched->begin() + size_t(s) * V, batched->begin() + size_t(s + 1) * V}),
              1e-5);
    EXPECT_EQ(pool->n_tokens(a[s]), pool->n_tokens(b[s]));
  }
  // a full pool: nothing appended anywhere
  auto tiny_pool = tiny::pool_for(*m, 16, 16);  // 5 pages
  std::vector<SeqId> seqs;
  std::vector<Engine::DecodeRow> many;
  for (int s = 0; s < 6; ++s) {
    seqs.push_back(tiny_pool->create_sequence());
    many.push_back({seqs.back(), 5, Pos::linear(0)});
  }
  EXPECT_FALSE(e.decode(*tiny_pool, many).ok());
  for (SeqId s : seqs) EXPECT_EQ(tiny_pool->n_tokens(s), 0);
  EXPECT_TRUE(tiny_pool->check_invariants().ok());
}

// A decode step refused by a full pool gives back the slots it took from the rows before the
// refused one: the sequence that had room appends as many tokens afterwards as before (its page
// holds 16; 3 are used, so 13 more fit only if the refused step's slot went back to it).
TEST_P(ForwardArch, ARefusedDecodeGivesItsSlotsBack) {
  auto m = tiny::load(tiny::model_path(GetParam()));
  ASSERT_TRUE(m);
  auto pool = tiny::pool_for(*m, 16, 16);  // 5 pages of 16
  Engine e(*m, 2);
  const SeqId s0 = pool->create_sequence();
  run(e, *pool, s0, {3, 4, 5}, tiny::linear_positions(3));
  for (int s = 0; s < 4; ++s) {  // the other 4 pages, one token each
    const SeqId o = pool->create_sequence();
    run(e, *pool, o, {7}, tiny::linear_positions(1));
  }
  ASSERT_EQ(pool->n_free_pages(), 0);
  const SeqId late = pool->create_sequence();
  const std::vector<Engine::DecodeRow> rows = {{s0, 6, Pos::linear(3)}, {late, 6, Pos::linear(0)}};
  ASSERT_FALSE(e.decode(*pool, rows).ok());
  ASSERT_EQ(pool->n_tokens(s0), 3);
  std::vector<Pos> more;
  for (int t = 3; t < 16; ++t) more.push_back(Pos::linear(t));
  auto at = pool->append(s0, more);
  EXPECT_TRUE(at.ok()) << "the refused step kept a slot of s0's page: " << at.message();
  EXPECT_TRUE(pool->check_invariants().ok());
}
