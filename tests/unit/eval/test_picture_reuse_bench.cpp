// The paper's Table 7 protocol on each vision family's committed tiny pair (tests/data/<family>:
// SmolVLM, Gemma 3, InternVL, LLaVA-1.5; random weights, so these are properties of the reuse
// path, not accuracy): the reuse harness (eval/reuse_bench.h) with the picture as the chunk B
// behind a random-token antecedent A, its delimiters around it (picture_items), as
// `kamera reuse-bench --mmproj --image` runs it for docs/RESULTS.md. Measured:
//   - relocation: the canonical's keys rotated to B's place equal a prefill there (f32 rounding);
//   - the full-rank patch rebuilds KV(B | A) (f32 rounding) and its KL to re-prefill is ~0;
//   - the rank-8 patch closes part of blind reuse's KL (eta > 0), where blind reuse has one.
#include <gtest/gtest.h>

#include "eval/items.h"
#include "eval/reuse_bench.h"
#include "support/table7_checks.h"
#include "support/tiny_models.h"
#include "support/vl_family_pairs.h"

namespace {

using namespace kamera;

using namespace vl_family_pairs;

class PictureReuseBench : public testing::TestWithParam<Family> {};

}  // namespace

TEST_P(PictureReuseBench, RelocationExactFullRankExactRank8Recovers) {
  const Family f = GetParam();
  const Pair p(f, 64);
  ASSERT_TRUE(p.picture);

  TokenItemSpec ts;  // the text around the picture: random ids (the vocabularies are random)
  ts.n_items = 4;
  ts.antecedent_tokens = 16;
  ts.chunk_tokens = 1;
  ts.query_tokens = 6;
  ts.seed = 7;
  const VisionDelimiters d = p.tower->delimiters();
  const auto items =
      picture_items(random_token_items(p.ctx->model(), ts), {*p.picture}, d.open, d.close);
  auto ctx =
      tiny::context(data(f, "decoder.gguf"), harness_kv_tokens(items), 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  ReuseBenchOptions o;
  o.ranks = {8, kFullRank};
  o.deep_half = false;
  auto r = run_reuse_bench(*ctx, items, o);
  ASSERT_TRUE(r.ok()) << r.message();
  table7::expect_protocol(*r, f.name, p.picture->n());
}

INSTANTIATE_TEST_SUITE_P(Families, PictureReuseBench, testing::ValuesIn(kFamilies), family_name);
