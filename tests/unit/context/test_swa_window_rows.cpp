// Sliding-window layers bounded by the window (ContextOptions::swa_full false, llama.cpp's
// default): a Context on gemma3 or gpt-oss (make-model's tiny presets, window 8) holds the local
// layers' rows of its live sequences' windows only, and a long context on it gives the logits of
// a pool that keeps every row; a sequence cut back below the rows it gave back is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "synthetic/synthetic_model.h"

#include "support/tiny_models.h"

namespace {

using namespace kamera;

struct Shape {
  int n_local = 0, n_global = 0, window = 0;
  size_t row_bytes = 0;  // one token's K and V of one layer (f32)
};

Shape shape_of(const Model& m) {
  Shape s;
  for (int l = 0; l < m.cfg.n_layers; ++l)
    (m.cfg.layer_kinds.at(l) == LayerKind::Local ? s.n_local : s.n_global)++;
  s.window = m.cfg.layer_kinds.window;
  s.row_bytes = 2 * size_t(m.cfg.kv_width()) * sizeof(float);
  return s;
}

std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(2, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

// Prefills `prompt` in micro-batches of 32, then decodes `steps` tokens one at a time; returns
// the logits of the prefill's last row and of every decode step, one after another.
std::vector<float> run(Engine& e, KvPool& pool, const std::vector<int32_t>& prompt,
                       const std::vector<int32_t>& steps) {
  const SeqId s = pool.create_sequence();
  const auto pos = tiny::linear_positions(int(prompt.size()));
  ForwardOptions fo;
  fo.max_batch = 32;
  auto out = e.forward(pool, s, ForwardInput::from_tokens(prompt, pos), fo);
  EXPECT_TRUE(out.ok()) << out.message();
  std::vector<float> all = out.ok() ? *out : std::vector<float>{};
  for (size_t i = 0; i < steps.size(); ++i) {
    const Engine::DecodeRow row{s, steps[i], Pos::linear(int(prompt.size() + i))};
    auto l = e.decode(pool, {&row, 1});
    EXPECT_TRUE(l.ok()) << l.message();
    if (l.ok()) all.insert(all.end(), l->begin(), l->end());
  }
  pool.free_sequence(s);
  return all;
}

// make-model's tiny file of the test's family, and a context on it with default options but
// these (swa_full false: the local layers bounded by the window when that is smaller).
class SwaWindowRows : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model = std::shared_ptr<const Model>(tiny::load(tiny::model_path(GetParam())));
    ASSERT_TRUE(model);
  }
  std::unique_ptr<Context> context(int64_t kv_tokens, int swa_sequences = 4, int swa_batch = 512) {
    ContextOptions o;
    o.kv_tokens = kv_tokens;
    o.swa_sequences = swa_sequences;
    o.swa_batch = swa_batch;
    o.anchor = {1};
    auto c = Context::create(model, o);
    EXPECT_TRUE(c.ok()) << c.message();
    return c.ok() ? std::move(c.value()) : nullptr;
  }
  std::shared_ptr<const Model> model;
};

// The pool of a 16k-token context: every global layer holds 16k rows, every local one its
// window's share (4 sequences x (W + a 512-token micro-batch + two pages), and 8 cached prompts'
// checkpoints of W + three pages), as the formula n_global x n_ctx + n_local x (W + batch) says,
// instead of n_layers x n_ctx; and 360 tokens
// (45 windows) prefilled and decoded on it give the logits of a pool that keeps every row.
TEST_P(SwaWindowRows, LongContextHoldsTheWindowAndMatchesFullRows) {
  const Shape sh = shape_of(*model);
  ASSERT_GT(sh.n_local, 0);
  ASSERT_EQ(sh.window, 8);
  auto ctx = context(1 << 14);
  ASSERT_TRUE(ctx);
  KvPool& pool = ctx->pool();
  const int64_t n_ctx = int64_t(pool.n_pages()) * pool.page_tokens();
  // and the cached prompts' checkpoints: window_entries x (W + three pages)
  const int64_t local_rows =
      4 * (sh.window + 512 + 2 * 16) + ctx->options().reuse.window_entries * (sh.window + 3 * 16);
  const size_t formula = sh.row_bytes * size_t(sh.n_global * n_ctx + sh.n_local * local_rows);
  const size_t full = sh.row_bytes * size_t(model->cfg.n_layers * n_ctx);
  const size_t align_slack = size_t(model->cfg.n_layers) * 2 * 64;
  EXPECT_LE(pool.arena_bytes(), formula + align_slack)
      << "full rows: " << full << " bytes, formula " << formula;
  EXPECT_LT(double(pool.arena_bytes()), 0.6 * double(full));

  auto reference = tiny::pool_for(*model, 512);  // every layer's row of every token
  const auto prompt = random_tokens(300, model->cfg.n_vocab, 11);
  const auto steps = random_tokens(60, model->cfg.n_vocab, 12);
  Engine& e = ctx->engine();
  const std::vector<float> want = run(e, *reference, prompt, steps);
  const std::vector<float> got = run(e, pool, prompt, steps);
  ASSERT_EQ(got.size(), want.size());
  double scale = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  const double diff = tiny::max_abs_diff(got, want);
  EXPECT_LE(diff, 1e-6 * scale) << "max |diff| " << diff << " of scale " << scale;
  RecordProperty("max_abs_diff", std::to_string(diff));
  RecordProperty("pool_bytes", std::to_string(pool.arena_bytes()));
  RecordProperty("full_rows_bytes", std::to_string(full));
  EXPECT_TRUE(pool.check_invariants().ok());
}

// While a sequence runs, its local layers hold at most W - 1 rows behind the micro-batch, two
// partial pages included; the pages come back as the window passes them.
TEST_P(SwaWindowRows, WindowPagesFollowTheWindow) {
  auto ctx = context(1 << 12, 1, 32);
  ASSERT_TRUE(ctx);
  KvPool& pool = ctx->pool();
  ASSERT_TRUE(pool.bounded_window());
  const int page = pool.page_tokens(), W = model->cfg.layer_kinds.window;
  const int checkpoints = ctx->options().reuse.window_entries * (W + 3 * page);
  EXPECT_EQ(pool.n_window_pages(), (W + 32 + 2 * page + checkpoints + page - 1) / page);
  const SeqId s = pool.create_sequence();
  const auto ids = random_tokens(400, model->cfg.n_vocab, 5);
  int max_used = 0;
  for (int i = 0; i < 400; i += 40) {  // 40 tokens per forward, micro-batches of 32
    const std::vector<int32_t> piece(ids.begin() + i, ids.begin() + i + 40);
    const auto pos = tiny::linear_positions(40, i);
    ForwardOptions fo;
    fo.max_batch = 32;
    ASSERT_TRUE(ctx->engine().forward(pool, s, ForwardInput::from_tokens(piece, pos), fo).ok());
    max_used = std::max(max_used, pool.stats().window_pages_used);
    EXPECT_LE(pool.n_window_rows(s), W - 1 + 32);
  }
  EXPECT_LE(max_used, (W - 1 + 32 + 2 * (page - 1)) / page + 1);
  EXPECT_EQ(pool.n_tokens(s), 400);
  EXPECT_TRUE(pool.check_invariants().ok());
}

// A sequence truncated below the rows its window gave back cannot go on: its next forward is
// refused before anything runs (the sequence unchanged); the same on full rows runs.
TEST_P(SwaWindowRows, CutBelowDroppedRowsIsRefused) {
  auto ctx = context(1 << 14);
  ASSERT_TRUE(ctx);
  KvPool& pool = ctx->pool();
  auto full = tiny::pool_for(*model, 512);
  Engine& e = ctx->engine();
  const auto ids = random_tokens(200, model->cfg.n_vocab, 3);
  const auto pos = tiny::linear_positions(200);
  const int32_t next[] = {7};
  const Pos at[] = {Pos::linear(100)};
  for (KvPool* p : {&pool, full.get()}) {
    const SeqId s = p->create_sequence();
    ForwardOptions fo;
    fo.max_batch = 16;  // the window passes token 100 long before the end
    ASSERT_TRUE(e.forward(*p, s, ForwardInput::from_tokens(ids, pos), fo).ok());
    ASSERT_TRUE(p->truncate(s, 100).ok());
    auto r = e.forward(*p, s, ForwardInput::from_tokens(next, at));
    if (p == full.get()) {
      EXPECT_TRUE(r.ok()) << r.message();
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
      EXPECT_NE(r.message().find("sliding window"), std::string::npos) << r.message();
      EXPECT_EQ(p->n_tokens(s), 100);
    }
    EXPECT_TRUE(p->check_invariants().ok());
  }
}

// A local layer reads only the keys within its window: on a pool that keeps every row, the local
// layers' rows of tokens far below the window are overwritten with NaN, and a decode step and a
// prefilled micro-batch after them give the logits of the untouched sequence bit for bit (a key
// gathered and scored there would carry the NaN into the micro-batch's output: 0 x NaN in the
// weights-times-values GEMM).
TEST_P(SwaWindowRows, LocalLayersReadOnlyTheWindowsKeys) {
  auto pool = tiny::pool_for(*model, 512);
  auto ctx = context(1 << 12);
  ASSERT_TRUE(ctx);
  Engine& e = ctx->engine();
  const auto ids = random_tokens(240, model->cfg.n_vocab, 21);
  const auto more = random_tokens(40, model->cfg.n_vocab, 22);
  const int W = model->cfg.layer_kinds.window;
  std::vector<float> out[2];
  for (int k = 0; k < 2; ++k) {
    const SeqId s = pool->create_sequence();
    ASSERT_TRUE(
        e.forward(*pool, s, ForwardInput::from_tokens(ids, tiny::linear_positions(240))).ok());
    if (k == 1) {  // poison the local rows of tokens [0, 240 - W - 8)
      std::vector<float> nan(size_t(model->cfg.kv_width()), std::nanf(""));
      for (int l = 0; l < model->cfg.n_layers; ++l) {
        if (model->cfg.layer_kinds.at(l) != LayerKind::Local) continue;
        for (int ch = 0; ch < int(pool->layout().channels.size()); ++ch)
          for (int t = 0; t < 240 - W - 8; ++t) pool->write_row(s, l, ch, t, nan.data());
      }
    }
    const Engine::DecodeRow row{s, 5, Pos::linear(240)};
    auto d = e.decode(*pool, {&row, 1});
    ASSERT_TRUE(d.ok()) << d.message();
    ForwardOptions all;
    all.logits = LogitsMode::All;  // 40 queries: the score blocks go through sgemm
    auto f =
        e.forward(*pool, s, ForwardInput::from_tokens(more, tiny::linear_positions(40, 241)), all);
    ASSERT_TRUE(f.ok()) << f.message();
    out[k] = *d;
    out[k].insert(out[k].end(), f->begin(), f->end());
    pool->free_sequence(s);
  }
  ASSERT_EQ(out[0].size(), out[1].size());
  size_t bad = 0;
  for (float v : out[1]) bad += std::isfinite(v) ? 0 : 1;
  EXPECT_EQ(bad, 0u) << "of " << out[1].size() << " logits";
  EXPECT_EQ(tiny::max_abs_diff(out[0], out[1]), 0.0);
}

// The released shapes (make-model's gemma3 1b, gpt-oss-20b) at a 32k-token context, four
// sequences at once with 512-token micro-batches (ContextOptions' defaults): the pool's bytes
// against the formula and against every row kept (--swa-full), without allocating either.
TEST(SwaWindowRowsShapes, ReleasedShapesAtA32kContext) {
  for (const auto& [arch, preset] :
       {std::pair{Arch::Gemma3, "1b"}, std::pair{Arch::GptOss, "gpt-oss-20b"}}) {
    Model m;
    m.cfg = *synthetic_preset(arch, preset);
    const Shape sh = shape_of(m);
    ContextOptions o;
    o.kv_tokens = 32768;
    const KvPool::Params bounded = pool_params(m, o);
    o.swa_full = true;
    const KvPool::Params full = pool_params(m, o);
    const int64_t n_ctx = int64_t(full.n_pages) * full.page_tokens;
    const double formula =
        double(sh.row_bytes) *
        double(sh.n_global * n_ctx + sh.n_local * (4 * (sh.window + 512 + 32) +
                                                   o.reuse.window_entries * (sh.window + 48)));
    const double b = double(KvPool::planned_bytes(bounded)),
                 f = double(KvPool::planned_bytes(full));
    EXPECT_LE(b, formula + 64.0 * 2 * m.cfg.n_layers) << preset;
    EXPECT_EQ(f, double(sh.row_bytes) * double(m.cfg.n_layers * n_ctx)) << preset;
    EXPECT_LT(b, 0.6 * f) << preset;
    std::printf(
        "%s: %d local (window %d) + %d global layers, %lld-token pool: %.1f MiB bounded, "
        "%.1f MiB full rows (%.3f)\n",
        preset, sh.n_local, sh.window, sh.n_global, (long long)n_ctx, b / 1048576.0, f / 1048576.0,
        b / f);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, SwaWindowRows, testing::Values("gemma3", "gpt-oss"),
                         [](const auto& info) {
                           return info.param == "gpt-oss" ? std::string("gpt_oss") : info.param;
                         });

}  // namespace
