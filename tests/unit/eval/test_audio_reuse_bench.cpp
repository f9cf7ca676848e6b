// The paper's Table 7 protocol on the audio pair, the twin of PictureReuseBench
// (test_picture_reuse_bench.cpp): the committed tiny Qwen2.5-Omni pair (tests/data/qwen25o: random
// weights, so these are properties of the reuse path, not accuracy), the reuse harness
// (eval/reuse_bench.h) with the clip (750 rows on positions (i, i, i)) as the chunk B behind a
// random-token antecedent A, <|audio_bos|> / <|audio_eos|> around it (picture_items), as
// `kamera reuse-bench --mmproj --audio` runs it for docs/RESULTS.md; the checks are the
// protocol's (support/table7_checks.h), and relocation's first layer is bit for bit.
#include <gtest/gtest.h>

#include "audio/audio_tower.h"
#include "eval/items.h"
#include "eval/reuse_bench.h"
#include "media/audio_file.h"
#include "support/table7_checks.h"
#include "support/tiny_models.h"

namespace {

using namespace kamera;

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen25o/";

}  // namespace

TEST(AudioReuseBench, RelocationExactFullRankExactRank8Recovers) {
  auto probe = tiny::context(kDir + "decoder.gguf", 64, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(probe);
  auto tower = load_media_tower(kDir + "mmproj.gguf", probe->model(), 1, nullptr);
  ASSERT_TRUE(tower.ok()) << tower.message();
  ASSERT_TRUE((*tower)->takes_audio());
  auto clip = load_audio(kDir + "clip_16k.wav", 16000);
  ASSERT_TRUE(clip.ok()) << clip.message();
  auto chunk = (*tower)->audio_chunk(clip->samples, nullptr, {});
  ASSERT_TRUE(chunk.ok()) << chunk.message();

  TokenItemSpec ts;  // the text around the clip: random ids
  ts.n_items = 3;
  ts.antecedent_tokens = 16;
  ts.chunk_tokens = 1;
  ts.query_tokens = 6;
  ts.seed = 7;
  const VisionDelimiters d = (*tower)->audio_delimiters();
  const auto items =
      picture_items(random_token_items(probe->model(), ts), {**chunk}, d.open, d.close);
  auto ctx = tiny::context(kDir + "decoder.gguf", harness_kv_tokens(items), 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  ReuseBenchOptions o;
  o.ranks = {8, kFullRank};
  o.deep_half = false;
  auto r = run_reuse_bench(*ctx, items, o);
  ASSERT_TRUE(r.ok()) << r.message();
  table7::expect_protocol(*r, "qwen25o (random weights)", 750);
  EXPECT_EQ(r->relocation_max_ulp_layer0, 0);  // the first layer bit for bit
}
