// A forward cut into slices (the server's fairness, issue 24 finding 4) gives what one forward
// gives: the same logits and KV rows in the pool (within f32 rounding, as micro-batches do),
// whatever the slice sizes, with other work (a decode of another sequence) run between slices.
#include <gtest/gtest.h>

#include <cmath>

#include "cache/chunk_cache.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

// Slices of a fixed size; between two slices, one decode step of another sequence.
struct SlicingPacer : ForwardPacer {
  int slice = 7, left = 7, pauses = 0;
  std::function<void()> between;
  int allowance() override { return std::max(1, left); }
  void spent(int n) override {
    left -= n;
    if (left > 0) return;
    ++pauses;
    left = slice;
    if (between) between();
  }
};

// The largest difference between the rows of two chunk KVs (f32); infinite when their shapes
// differ.
double row_diff(const ChunkKV& a, const ChunkKV& b) {
  if (a.blocks.size() != b.blocks.size() || a.n_tokens != b.n_tokens) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    const ChannelMatrix &x = a.blocks[i], &y = b.blocks[i];
    if (x.rows() != y.rows() || x.cols() != y.cols()) return INFINITY;
    for (size_t k = 0; k < size_t(x.rows()) * size_t(x.cols()); ++k)
      worst = std::max(worst, std::fabs(double(x.f32_data()[k]) - y.f32_data()[k]));
  }
  return worst;
}

class PacedForward : public testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(PacedForward, SlicesGiveTheWholeForward) {
  tiny::ContextRig rig(GetParam(), 4000, 16);
  const int V = rig.model->cfg.n_vocab;
  const ChunkContent c = tiny::random_chunk(61, V, 5);
  // Whole: one forward (61 tokens < the 512 micro-batch).
  ScopedSequence whole(*rig.pool);
  auto ref = rig.cache->forward_chunk(whole.id(), c, 1, LogitsMode::All);
  ASSERT_TRUE(ref.ok()) << ref.message();
  const ChunkKV ref_kv = read_chunk_kv(*rig.pool, whole.id(), 0, c.n());
  // Sliced, with a decode step of another sequence between every two slices.
  ScopedSequence other(*rig.pool);
  ASSERT_TRUE(rig.cache->forward_chunk(other.id(), tiny::random_chunk(5, V, 9), 0).ok());
  for (int slice : {1, 7, 16, 60}) {
    SlicingPacer pacer;
    pacer.slice = pacer.left = slice;
    int32_t next = 5;
    pacer.between = [&] {
      const Engine::DecodeRow row{other.id(), 42, Pos::linear(next++)};
      ASSERT_TRUE(rig.engine->decode(*rig.pool, {&row, 1}).ok());
    };
    rig.cache->set_pacer(&pacer);
    ScopedSequence sliced(*rig.pool);
    auto got = rig.cache->forward_chunk(sliced.id(), c, 1, LogitsMode::All);
    rig.cache->set_pacer(nullptr);
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_EQ(pacer.pauses, c.n() / slice) << "slice " << slice;
    EXPECT_LT(tiny::max_abs_diff(*got, *ref), 1e-5) << "slice " << slice;
    const ChunkKV kv = read_chunk_kv(*rig.pool, sliced.id(), 0, c.n());
    // Keys and values of every token: a row depends only on the rows before it. Equal within
    // f32 rounding (the GEMMs of another batch size sum in another order), as micro-batches are.
    EXPECT_LT(row_diff(kv, ref_kv), 1e-5) << "slice " << slice;
  }
  EXPECT_TRUE(rig.pool->check_invariants().ok());
}

// A canonical formed sliced is the canonical formed whole (what a chunk upload stores).
TEST_P(PacedForward, CanonicalFormedInSlicesIsTheSame) {
  tiny::ContextRig whole(GetParam(), 4000, 16), sliced(GetParam(), 4000, 16);
  const ChunkContent c = tiny::random_chunk(45, whole.model->cfg.n_vocab, 11);
  auto a = whole.cache->canonical(c);
  ASSERT_TRUE(a.ok()) << a.message();
  SlicingPacer pacer;
  pacer.slice = pacer.left = 8;
  sliced.cache->set_pacer(&pacer);
  auto b = sliced.cache->canonical(c);
  sliced.cache->set_pacer(nullptr);
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_GE(pacer.pauses, 5);
  EXPECT_LT(row_diff((*a)->kv, (*b)->kv), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Arch, PacedForward,
                         testing::Values("llama", "qwen2", "deepseek2", "qwen3", "qwen3moe",
                                         "qwen3vl", "deepseek2:kimi-vl-tiny"));
