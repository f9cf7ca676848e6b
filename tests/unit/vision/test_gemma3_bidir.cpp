// A Gemma 3 picture's rows attend to each other both ways in the decoder (model/forward.h
// NonCausalSpan; cache/chunk_cache.h picture_rows), as llama.cpp d32676d's mtmd decodes them
// (tests/data/gemma3/README.md): the logits after the picture against llama.cpp's, with
// micro-batches smaller than the picture, through a decode step's pieces; and every other family
// decodes an embedding chunk causally, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "cache/chunk_cache.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "support/gemma3_fixture.h"
#include "support/tiny_models.h"
#include "vision/gemma3_chunks.h"

using namespace kamera;
using namespace gemma3_fixture;

namespace {

size_t argmax(const float* v, size_t n) {
  return size_t(std::max_element(v, v + n) - v);
}

// The tiny pair's prompt as llama.cpp's mtmd chunked it (before the picture, its rows, after it).
struct Rig {
  std::unique_ptr<Context> ctx = tiny::context(kDir + "decoder.gguf", 512, 16, size_t(1) << 26, 1);
  std::vector<int32_t> before, after;
  std::shared_ptr<const ChunkContent> pic;
  Rig() {
    const std::vector<int32_t> flat = llama_cpp_flat_prompt();
    const auto at = std::find(flat.begin(), flat.end(), -1);
    before.assign(flat.begin(), at);
    after.assign(at + 1, flat.end());
    auto tower = Gemma3VisionModel::load(kDir + "mmproj.gguf");
    auto img = load_image(kDir + "img_64.png");
    if (!ctx || !tower.ok() || !img.ok()) return;
    ThreadPool pool(1);
    Gemma3ImageChunks images(*tower, ctx->model().fingerprint, &pool);
    auto p = images.image(*img);
    if (p.ok()) pic = *p;
  }
  // The prompt through the engine: the picture's rows with `span` (empty: causal), every forward
  // in micro-batches of at most max_batch. The logits after the prompt.
  std::vector<float> engine_logits(NonCausalSpan span, int max_batch) {
    ScopedSequence s(ctx->pool());
    Engine& e = ctx->engine();
    ForwardOptions o;
    o.max_batch = max_batch;
    o.logits = LogitsMode::None;
    auto run = [&](ForwardInput in) { return e.forward(ctx->pool(), s.id(), in, o); };
    const int nb = int(before.size()), np = pic->n();
    const auto p0 = tiny::linear_positions(nb), p1 = tiny::linear_positions(np, nb),
               p2 = tiny::linear_positions(int(after.size()), nb + np);
    EXPECT_TRUE(run(ForwardInput::from_tokens(before, p0)).ok());
    ForwardInput rows = forward_input(*pic, p1);
    rows.non_causal = span;
    EXPECT_TRUE(run(rows).ok());
    o.logits = LogitsMode::Last;
    auto r = run(ForwardInput::from_tokens(after, p2));
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::vector<float>{};
  }
};

}  // namespace

// The engine with the span and with none, against llama.cpp's two decodes of the same rows
// (causal attention off: llama_cpp_64_logits.f32; on: llama_cpp_64_causal_logits.f32), and a
// micro-batch limit of 5 (smaller than the 16 rows) giving the one-batch logits.
TEST(Gemma3Bidir, SpanMatchesLlamaCppAtAnyMicroBatch) {
  Rig r;
  ASSERT_TRUE(r.ctx && r.pic);
  ASSERT_EQ(r.pic->n(), 16);
  const size_t V = size_t(r.ctx->model().cfg.n_vocab);
  const std::vector<float> bidir = read_f32(kDir + "llama_cpp_64_logits.f32");
  const std::vector<float> causal = read_f32(kDir + "llama_cpp_64_causal_logits.f32");
  ASSERT_EQ(bidir.size(), V);
  const NonCausalSpan all{0, r.pic->n()};
  const std::vector<float> one = r.engine_logits(all, 512);
  const std::vector<float> small = r.engine_logits(all, 5);
  const std::vector<float> plain = r.engine_logits({}, 512);
  ASSERT_EQ(one.size(), V);
  ASSERT_EQ(small.size(), V);
  ASSERT_EQ(plain.size(), V);
  const double d_one = rel_diff(one.data(), bidir.data(), V);
  const double d_small = rel_diff(small.data(), bidir.data(), V);
  const double d_batch = rel_diff(small.data(), one.data(), V);
  const double d_plain = rel_diff(plain.data(), causal.data(), V);
  std::printf(
      "span, one batch vs llama.cpp (rows non-causal): %.3e; micro-batches of 5: %.3e (vs one "
      "batch %.3e); no span vs llama.cpp (rows causal): %.3e\n",
      d_one, d_small, d_batch, d_plain);
  EXPECT_LT(d_one, 1e-3);
  EXPECT_LT(d_small, 1e-3);
  EXPECT_LT(d_batch, 1e-5);
  EXPECT_LT(d_plain, 1e-3);
  EXPECT_EQ(argmax(one.data(), V), argmax(bidir.data(), V));
  EXPECT_EQ(argmax(small.data(), V), argmax(bidir.data(), V));
  EXPECT_EQ(argmax(plain.data(), V), argmax(causal.data(), V));
}

// The next piece never ends inside the span: it stops at the span's start, or runs to its end.
TEST(Gemma3Bidir, PiecesNeverSplitTheSpan) {
  ForwardCursor cur;
  cur.in.n = 20;
  cur.in.non_causal = {2, 18};
  std::vector<int> sizes;
  while (!cur.finished()) {
    sizes.push_back(cur.piece(5));
    cur.done += sizes.back();
  }
  EXPECT_EQ(sizes, (std::vector<int>{2, 16, 2}));
  cur.done = 0;
  cur.in.non_causal = {};
  EXPECT_EQ(cur.piece(5), 5);
  EXPECT_EQ(cur.piece(50), 20);
}

// The scheduler's chunked prefill: the picture as pieces of a decode step (Engine::decode with
// pieces), each sized by ForwardCursor::piece; a piece that would split the span is refused.
TEST(Gemma3Bidir, DecodeStepPiecesKeepTheSpanWhole) {
  Rig r;
  ASSERT_TRUE(r.ctx && r.pic);
  Engine& e = r.ctx->engine();
  KvPool& pool = r.ctx->pool();
  const int nb = int(r.before.size()), np = r.pic->n();
  const auto p1 = tiny::linear_positions(np, nb);
  ForwardInput rows = forward_input(*r.pic, p1);
  rows.non_causal = {0, np};
  // a sequence with the text before the picture; the picture's rows in pieces, then the text after
  auto picture_in_pieces = [&](ScopedSequence& s) {
    ASSERT_TRUE(
        e.forward(pool, s.id(), ForwardInput::from_tokens(r.before, tiny::linear_positions(nb)))
            .ok());
    auto cur = e.begin_forward(pool, s.id(), rows);
    ASSERT_TRUE(cur.ok());
    const Engine::Piece split{&*cur, 3};
    const auto refused = e.decode(pool, {}, {&split, 1});
    ASSERT_FALSE(refused.ok()) << "a piece splitting the span ran";
    EXPECT_EQ(refused.code(), ErrorCode::InvalidArgument);
    EXPECT_EQ(cur->done, 0);
    while (!cur->finished()) {
      const Engine::Piece p{&*cur, cur->piece(3)};
      ASSERT_TRUE(e.decode(pool, {}, {&p, 1}).ok());
    }
  };
  ScopedSequence s(pool);
  picture_in_pieces(s);
  auto got = e.forward(
      pool, s.id(),
      ForwardInput::from_tokens(r.after, tiny::linear_positions(int(r.after.size()), nb + np)));
  ASSERT_TRUE(got.ok()) << got.message();
  const std::vector<float> want = r.engine_logits({0, np}, 512);
  const double d = rel_diff(got->data(), want.data(), want.size());
  std::printf("picture in a decode step's pieces vs one forward: %.3e\n", d);
  EXPECT_LT(d, 1e-5);
}

// An embedding chunk through the chunk cache: with a causal family, changing its last row leaves
// every earlier row's logits bit for bit the same (llama: idefics3 and mini-VL's decoders,
// qwen2vl, qwen3vl, deepseek2: Kimi-VL); with gemma3, the first row's logits change.
TEST(Gemma3Bidir, OnlyGemma3ChunksSeeLaterRows) {
  for (const char* arch : {"llama", "qwen2vl", "qwen3vl", "deepseek2", "gemma3"}) {
    auto ctx = tiny::context(tiny::model_path(arch), 256, 16, size_t(1) << 24, 1);
    ASSERT_TRUE(ctx) << arch;
    const ModelConfig& cfg = ctx->model().cfg;
    const int n = 12, w = cfg.input_width();
    ChunkContent c;
    c.dim = w;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int i = 0; i < n * w; ++i) c.embeddings.push_back(u(rng));
    for (int i = 0; i < n; ++i) c.layout.push_back(Pos::linear(i));
    ChunkContent d = c;
    for (int i = (n - 1) * w; i < n * w; ++i) d.embeddings[size_t(i)] *= -1.0f;
    auto logits = [&](const ChunkContent& x) {
      ScopedSequence s(ctx->pool());
      auto r = ctx->cache().forward_chunk(s.id(), x, 0, LogitsMode::All);
      EXPECT_TRUE(r.ok()) << arch << ": " << r.message();
      return r.ok() ? *r : std::vector<float>{};
    };
    const std::vector<float> a = logits(c), b = logits(d);
    const size_t V = size_t(cfg.n_vocab), head = size_t(n - 1) * V;
    ASSERT_EQ(a.size(), size_t(n) * V);
    ASSERT_EQ(b.size(), a.size());
    const bool same = std::memcmp(a.data(), b.data(), head * sizeof(float)) == 0;
    const double first = rel_diff(a.data(), b.data(), V);
    std::printf("%s: rows before the changed one bit-identical: %d; first row moved %.3e\n", arch,
                int(same), first);
    if (std::string(arch) == "gemma3") {
      EXPECT_GT(first, 1e-4) << "gemma3's first row does not see the last";
    } else {
      EXPECT_TRUE(same) << arch << ": an earlier row saw a later one";
    }
  }
}

// The chunk cache's paced forwards (the server's sliced prefill when nothing decodes): pieces of
// at most 3 tokens, but the picture's 16 rows in one; the logits are llama.cpp's.
TEST(Gemma3Bidir, PacedChunkCacheKeepsTheSpanWhole) {
  struct Pacer : ForwardPacer {
    std::vector<int> pieces;
    int allowance() override { return 3; }
    void spent(int tokens) override { pieces.push_back(tokens); }
  };
  Rig r;
  ASSERT_TRUE(r.ctx && r.pic);
  const size_t V = size_t(r.ctx->model().cfg.n_vocab);
  const std::vector<float> bidir = read_f32(kDir + "llama_cpp_64_logits.f32");
  ChunkCache& cc = r.ctx->cache();
  Pacer pacer;
  cc.set_pacer(&pacer);
  ScopedSequence s(r.ctx->pool());
  const int32_t nb = int32_t(r.before.size()), np = r.pic->n();
  ASSERT_TRUE(cc.forward_chunk(s.id(), ChunkContent::from_tokens(r.before), 0).ok());
  ASSERT_TRUE(cc.forward_chunk(s.id(), *r.pic, nb).ok());
  auto got =
      cc.forward_chunk(s.id(), ChunkContent::from_tokens(r.after), nb + np, LogitsMode::Last);
  cc.set_pacer(nullptr);
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_EQ(got->size(), V);
  const double d = rel_diff(got->data(), bidir.data(), V);
  std::printf("paced (pieces of 3) vs llama.cpp (rows non-causal): %.3e\n", d);
  EXPECT_LT(d, 1e-3);
  EXPECT_EQ(argmax(got->data(), V), argmax(bidir.data(), V));
  EXPECT_NE(std::find(pacer.pieces.begin(), pacer.pieces.end(), np), pacer.pieces.end());
  for (int n : pacer.pieces) EXPECT_TRUE(n <= 3 || n == np) << n;
}
