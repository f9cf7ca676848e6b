// Store entries on disk: round trips, restarts, corrupt and foreign files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "cache/chunk_cache.h"
#include "store/disk_tier.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

std::string fresh_dir(const std::string& name) {
  const std::string d = unique_temp("kamera-store-") + name + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

ChunkContent chunk(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& t : ids) t = int32_t(3 + rng() % uint32_t(vocab - 3));
  return ChunkContent::from_tokens(ids);
}

}  // namespace

TEST(StoreTiers, EntriesRoundTripBitExact) {
  auto ctx = tiny::context(tiny::model_path("deepseek2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  const Model* m = &ctx->model();
  ChunkCache& cc = ctx->cache();
  auto A = chunk(12, m->cfg.n_vocab, 1), B = chunk(15, m->cfg.n_vocab, 2);
  PatchOptions po;
  po.rank = 4;
  po.dtype = DType::BF16;
  const std::vector<ChunkContent> ante = {A};
  auto p = cc.patch(ante, B, po);
  auto c = cc.canonical(B);
  ASSERT_TRUE(p.ok() && c.ok());
  const std::string cb = serialize_canonical(**c, m->fingerprint);
  const std::string pb = serialize_patch(**p, m->fingerprint);
  auto c2 = deserialize_canonical(cb, m->fingerprint);
  auto p2 = deserialize_patch(pb, m->fingerprint);
  ASSERT_TRUE(c2.ok()) << c2.message();
  ASSERT_TRUE(p2.ok()) << p2.message();
  EXPECT_EQ(serialize_canonical(**c2, m->fingerprint), cb);
  EXPECT_EQ(serialize_patch(**p2, m->fingerprint), pb);
  EXPECT_TRUE((*p2)->key == (*p)->key);
  // another model's fingerprint, a flipped byte anywhere, a truncation: refused
  EXPECT_FALSE(deserialize_canonical(cb, {m->fingerprint[0] ^ 1, m->fingerprint[1]}).ok());
  for (size_t i = 0; i < cb.size(); i += 37) {
    std::string bad = cb;
    bad[i] ^= 0x20;
    EXPECT_FALSE(deserialize_canonical(bad, m->fingerprint).ok()) << "byte " << i;
  }
  for (size_t n : {size_t(0), size_t(10), cb.size() / 2, cb.size() - 1})
    EXPECT_FALSE(deserialize_canonical(cb.substr(0, n), m->fingerprint).ok());
  EXPECT_FALSE(deserialize_patch(cb, m->fingerprint).ok());  // wrong kind
}

// A second process (a new store over the same directory) serves what the first one formed,
// with zero forwards and the same bytes; corrupt and foreign files are discarded and recomputed.
TEST(StoreTiers, DiskTierSurvivesRestartAndRejectsBadFiles) {
  std::shared_ptr<const Model> m = tiny::load(tiny::model_path("qwen2"));
  ASSERT_TRUE(m);
  const std::string dir = fresh_dir("restart");
  auto A = chunk(10, m->cfg.n_vocab, 3), B = chunk(14, m->cfg.n_vocab, 4),
       Q = chunk(3, m->cfg.n_vocab, 5);
  const std::vector<ChunkContent> chunks = {A, B};
  ServeOptions so;
  so.patch.rank = 4;
  // One "process": a context whose store has the disk tier over `dir` (and an empty memory).
  auto serve = [&](std::shared_ptr<StoreTier> tier, ServeReport* rep, ChunkStore::Stats* st) {
    ContextOptions o;
    o.n_threads = 1;
    o.kv_tokens = 200;
    o.store_bytes = size_t(1) << 28;
    o.tiers = {tier};
    o.anchor = {1};
    auto ctx = Context::create(m, o);
    EXPECT_TRUE(ctx.ok()) << ctx.message();
    ChunkCache& cc = (*ctx)->cache();
    ScopedSequence s((*ctx)->pool());
    auto r = cc.assemble(s.id(), chunks, so);
    EXPECT_TRUE(r.ok()) << r.message();
    *rep = *r;
    auto logits = *cc.forward_chunk(s.id(), Q, r->next_position, LogitsMode::Last);
    *st = (*ctx)->store().stats();
    return logits;
  };
  ServeReport r1, r2, r3;
  ChunkStore::Stats s1, s2, s3;
  std::vector<float> l1, l2, l3;
  {
    auto tier = DiskTier::open(dir, m->fingerprint, m->kv_layout());
    ASSERT_TRUE(tier.ok()) << tier.message();
    l1 = serve(*tier, &r1, &s1);
    EXPECT_GT(r1.forwards, 0);
    EXPECT_EQ((*tier)->stats().writes, 3);  // 2 canonicals + 1 patch
  }
  {
    auto tier = DiskTier::open(dir, m->fingerprint, m->kv_layout());  // "restart"
    ASSERT_TRUE(tier.ok()) << tier.message();
    l2 = serve(*tier, &r2, &s2);
    EXPECT_EQ(r2.forwards, 0);
    EXPECT_EQ(l1, l2);
    EXPECT_EQ(s2.tier_canonical_hits, 2);
    EXPECT_EQ(s2.tier_patch_hits, 1);
  }
  // corrupt one canonical file, replace another by a foreign model's entry
  const auto file_of = [&](const ChunkContent& c) {
    return fmt::format("{}/canonical/{}.kce", dir, chunk_id(m->fingerprint, c).hex());
  };
  {
    std::fstream f(file_of(A), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  {
    auto other = tiny::context(tiny::model_path("llama"), 100, 16, size_t(1) << 28, 1);
    ASSERT_TRUE(other);
    auto foreign = other->cache().canonical(B);
    ASSERT_TRUE(foreign.ok());
    std::ofstream(file_of(B), std::ios::binary)
        << serialize_canonical(**foreign, other->model().fingerprint);
  }
  {
    auto tier = DiskTier::open(dir, m->fingerprint, m->kv_layout());
    ASSERT_TRUE(tier.ok()) << tier.message();
    l3 = serve(*tier, &r3, &s3);
    EXPECT_GE(r3.forwards, 1);  // both canonicals recomputed
    EXPECT_EQ((*tier)->stats().discarded, 2);
    EXPECT_LT(tiny::max_abs_diff(l1, l3), 1e-6);
  }
  EXPECT_FALSE(DiskTier::open("/proc/kamera-not-writable", m->fingerprint, m->kv_layout()).ok());
  std::filesystem::remove_all(dir);
}
