// The relocation check the picture-chunk tests share (idefics3, gemma3, internvl): a chunk's
// canonical KV placed after token 1 at 1 + delta gives the next logits of a fresh prefill of the
// same at those positions.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <initializer_list>

#include "cache/chunk_cache.h"
#include "context/context.h"
#include "support/idefics3_fixture.h"  // rel_diff

namespace chunk_relocation {

// For each delta: token 1 at delta, then the chunk's canonical appended at 1 + delta, then q;
// against token 1, the chunk prefilled at 1 + delta, then q. max |a - b| / max |b| of q's logits
// below `bound` (printed).
inline void expect_relocates(kamera::Context& ctx, const kamera::ChunkContent& chunk,
                             const kamera::ChunkContent& q, std::initializer_list<int32_t> deltas,
                             double bound) {
  using namespace kamera;
  ChunkCache& cc = ctx.cache();
  auto canon = cc.canonical(chunk);
  ASSERT_TRUE(canon.ok()) << canon.message();
  for (int32_t delta : deltas) {
    ScopedSequence a(ctx.pool());  // token 1 (the context's anchor), the canonical at 1 + delta
    ASSERT_TRUE(cc.forward_chunk(a.id(), ChunkContent::from_tokens({1}), delta).ok());
    ASSERT_TRUE(cc.append_chunk(a.id(), **canon, nullptr, 1 + delta).ok());
    auto got = cc.forward_chunk(a.id(), q, 1 + delta + chunk.extent(), LogitsMode::All);
    ScopedSequence b(ctx.pool());  // a fresh prefill of the same at those positions
    ASSERT_TRUE(cc.forward_chunk(b.id(), ChunkContent::from_tokens({1}), delta).ok());
    ASSERT_TRUE(cc.forward_chunk(b.id(), chunk, 1 + delta).ok());
    auto want = cc.forward_chunk(b.id(), q, 1 + delta + chunk.extent(), LogitsMode::All);
    ASSERT_TRUE(got.ok() && want.ok());
    const double rel = idefics3_fixture::rel_diff(got->data(), want->data(), got->size());
    std::printf("delta %d: relocated vs prefilled %.3e\n", delta, rel);
    EXPECT_LT(rel, bound) << "delta " << delta;
  }
}

}  // namespace chunk_relocation
