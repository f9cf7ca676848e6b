// Cached prompts on pools bounded by the sliding window (cache/prefix_index.h, "Pools bounded by
// the sliding window"): a Context on gemma3 or gpt-oss (make-model's tiny presets, window 8) with
// swa_full off keeps each cached prompt's global-layer rows and the last window of its
// local-layer rows, so a chat's next turn resumes at the end of the last one and computes only
// its new tokens, with the logits of a cold run; a prompt that leaves the entry where the window
// rows are gone resumes at an earlier checkpoint or recomputes, never reads rows a cold run would
// not have.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "cache/prompt_assembler.h"
#include "context/context.h"

#include "support/tiny_models.h"

namespace {

using namespace kamera;

std::unique_ptr<Context> bounded_context(std::shared_ptr<const Model> model, bool cache) {
  ContextOptions o;
  o.kv_tokens = 1 << 12;
  o.anchor = {1};
  if (!cache) o.reuse.prefix_cache_tokens = 0;
  auto c = Context::create(std::move(model), o);
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? std::move(c.value()) : nullptr;
}

PromptPlan plan_of(Context& ctx, const std::vector<int32_t>& tokens) {
  PromptPlan p = plan_start(ctx.cache());
  plan_text(p, ctx.cache(), nullptr, tokens);
  return p;
}

int argmax(const std::vector<float>& l) {
  return int(std::max_element(l.begin(), l.end()) - l.begin());
}

class SwaPrefixCache : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model = std::shared_ptr<const Model>(tiny::load(tiny::model_path(GetParam())));
    ASSERT_TRUE(model);
    ASSERT_EQ(model->cfg.layer_kinds.window, 8);
    ctx = bounded_context(model, true);
    cold = bounded_context(model, false);
    ASSERT_TRUE(ctx && cold);
    ASSERT_TRUE(ctx->pool().bounded_window());
    ASSERT_TRUE(ctx->assembler().prefix());
  }

  // Turn 1 as the server runs it: the prompt served, kept (the prompt alone), `steps` greedy
  // tokens decoded one at a time, then kept with the reply it holds. Returns the reply held.
  std::vector<int32_t> turn1(const std::vector<int32_t>& prompt, int steps) {
    PromptAssembler& pa = ctx->assembler();
    const PromptPlan plan = plan_of(*ctx, prompt);
    Assembly a;
    auto logits = pa.serve(plan, a);
    EXPECT_TRUE(logits.ok()) << logits.message();
    pa.remember(plan, a, a.seq, {});
    std::vector<int32_t> reply;
    std::vector<float> l = logits.ok() ? *logits : std::vector<float>(1);
    const int32_t p0 = int32_t(plan.ids.size());
    for (int i = 0; i < steps; ++i) {
      reply.push_back(argmax(l));
      if (i + 1 == steps) break;  // the last token sampled is not fed (as the scheduler)
      const Engine::DecodeRow row{a.seq, reply.back(), Pos::linear(p0 + i)};
      auto d = ctx->engine().decode(ctx->pool(), {&row, 1});
      EXPECT_TRUE(d.ok()) << d.message();
      if (d.ok()) l = *d;
    }
    pa.remember(plan, a, a.seq, reply);
    ctx->pool().free_sequence(a.seq);
    reply.pop_back();  // what the sequence held
    return reply;
  }

  // Serves `prompt` on the caching context and on the cold one: the assembly, and the largest
  // logit difference in units of the cold logits' scale.
  double serve_both(const std::vector<int32_t>& prompt, Assembly& a) {
    auto got = ctx->assembler().serve(plan_of(*ctx, prompt), a);
    EXPECT_TRUE(got.ok()) << got.message();
    Assembly c;
    auto want = cold->assembler().serve(plan_of(*cold, prompt), c);
    EXPECT_TRUE(want.ok()) << want.message();
    EXPECT_EQ(c.reused, 0);
    if (!got.ok() || !want.ok()) return 1e9;
    ctx->pool().free_sequence(a.seq);
    cold->pool().free_sequence(c.seq);
    double scale = 0;
    for (float v : *want) scale = std::max(scale, double(std::fabs(v)));
    return tiny::max_abs_diff(*got, *want) / scale;
  }

  std::shared_ptr<const Model> model;
  std::unique_ptr<Context> ctx, cold;
};

// Batch shapes differ (turn 1's prefill and decode steps against one forward of the whole
// prompt), so the logits agree to float rounding: 1e-5 of their scale.
constexpr double kTolerance = 1e-5;

// Turn 2 extends turn 1's prompt and the reply it held: served from the entry up to its end
// (every token of it), only its new tokens computed, the cold run's logits.
TEST_P(SwaPrefixCache, SecondTurnResumesAtTheEndOfTheFirst) {
  const int vocab = model->cfg.n_vocab;
  const auto prompt = tiny::random_tokens(100, vocab, 1);
  const auto reply = turn1(prompt, 12);
  ASSERT_EQ(reply.size(), 11u);
  std::vector<int32_t> next = prompt;
  next.insert(next.end(), reply.begin(), reply.end());
  const auto user = tiny::random_tokens(30, vocab, 2);
  next.insert(next.end(), user.begin(), user.end());
  Assembly a;
  const double diff = serve_both(next, a);
  EXPECT_EQ(a.reused, int64_t(prompt.size() + reply.size()));  // past the anchor
  EXPECT_EQ(a.query.n(), int(user.size()));                    // recomputed: the new tokens
  EXPECT_LE(diff, kTolerance);
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", diff);
  RecordProperty("max_abs_diff_of_scale", text);
  EXPECT_TRUE(ctx->pool().check_invariants().ok());
  const KvPool::Stats st = ctx->pool().stats();
  EXPECT_LE(st.window_pages_used, st.window_pages_total);
}

// A repeat of turn 1 (a regenerated answer) resumes at the checkpoint kept after its prompt; a
// turn that leaves the reply where the entry no longer holds the window resumes at that same
// checkpoint; one that leaves it within a block of its end resumes there; the cold logits each.
TEST_P(SwaPrefixCache, OtherHitsResumeOnlyWhereTheWindowIsHeld) {
  const int vocab = model->cfg.n_vocab;
  const auto prompt = tiny::random_tokens(100, vocab, 3);
  const auto reply = turn1(prompt, 12);
  const int P = int(prompt.size());
  Assembly again;
  EXPECT_LE(serve_both(prompt, again), kTolerance);
  EXPECT_EQ(again.reused, P - 1);   // all but the query's last token
  for (const int keep : {4, 10}) {  // reply tokens kept before the prompt departs from it
    std::vector<int32_t> next = prompt;
    next.insert(next.end(), reply.begin(), reply.begin() + keep);
    const int32_t r = reply[size_t(keep)];
    next.push_back(r + 1 < vocab ? r + 1 : 2);  // departs here
    const auto user = tiny::random_tokens(20, vocab, 4);
    next.insert(next.end(), user.begin(), user.end());
    Assembly a;
    EXPECT_LE(serve_both(next, a), kTolerance) << keep;
    // W = 8: the entry holds local rows of its last 8 tokens; resuming after 4 reply tokens needs
    // rows of tokens the window passed (-> the prompt's checkpoint), after 10 it does not.
    EXPECT_EQ(a.reused, keep == 4 ? P : P + keep) << keep;
  }
  EXPECT_TRUE(ctx->pool().check_invariants().ok());
}

// At most window_entries cached prompts keep a checkpoint (their local rows are in the window page
// space, sized for them): more conversations evict the least recently used whole, and the pool's
// window pages suffice throughout.
TEST_P(SwaPrefixCache, CheckpointsAreBoundedByWindowEntries) {
  const int cap = ctx->options().reuse.window_entries;
  ASSERT_GT(cap, 0);
  for (int c = 0; c < cap + 4; ++c) turn1(tiny::random_tokens(40, model->cfg.n_vocab, 100 + c), 4);
  const PrefixIndex::Stats s = ctx->assembler().prefix()->stats();
  EXPECT_LE(s.entries, cap);
  EXPECT_GT(s.evictions, 0);
  EXPECT_TRUE(ctx->pool().check_invariants().ok());
}

INSTANTIATE_TEST_SUITE_P(Families, SwaPrefixCache, testing::Values("gemma3", "gpt-oss"),
                         [](const auto& info) {
                           return info.param == "gpt-oss" ? std::string("gpt_oss") : info.param;
                         });

}  // namespace
