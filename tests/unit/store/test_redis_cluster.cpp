// The Redis tier in cluster mode (store/redis_link.h) against a real Redis Cluster started here
// (support/redis_cluster.h: 3 masters + 3 replicas on free loopback ports, with a password):
// hash slots as the cluster computes them, entries spread over the masters and read back through
// any seed, ASK and MOVED redirects followed while a slot migrates, pipelined batches, a master
// killed under writes (its replica takes over; no acknowledged entry is lost, nothing wrong is
// read), and a partition from the whole cluster (loads miss at once instead of hanging). Each test
// skips, saying so, without redis-server.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "store/redis_link.h"
#include "store/redis_tier.h"
#include "support/redis_cluster.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

const std::string kKey = "the server's store key, 32 bytes";

std::shared_ptr<RedisTier> open_tier(const std::string& url, const Model& m, int wait = 0) {
  RedisTier::Options o;
  o.key = kKey;
  o.timeout_ms = 500;
  o.retry_after_ms = 1000;
  o.wait_replicas = wait;
  o.wait_ms = 100;
  auto t = RedisTier::open(url, m.fingerprint, m.kv_layout(), o);
  EXPECT_TRUE(t.ok()) << t.message();
  return t.ok() ? *t : nullptr;
}

bool same_kv(const ChunkKV& a, const ChunkKV& b) {
  if (a.blocks.size() != b.blocks.size()) return false;
  for (size_t i = 0; i < a.blocks.size(); ++i)
    if (a.blocks[i].bytes() != b.blocks[i].bytes() ||
        std::memcmp(a.blocks[i].raw(), b.blocks[i].raw(), a.blocks[i].bytes()) != 0)
      return false;
  return true;
}

// One shared cluster for the tests that do not break it.
class RedisCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new OwnCluster(); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (!cluster_->ok()) GTEST_SKIP() << cluster_->why();
    ctx_ = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
    ASSERT_TRUE(ctx_);
  }
  std::shared_ptr<const CanonicalEntry> entry(int i) {
    auto e = ctx_->cache().canonical(ChunkContent::from_tokens({5, 9, i % 300 + 20, i / 300 + 7}));
    EXPECT_TRUE(e.ok());
    return *e;
  }
  static OwnCluster* cluster_;
  std::unique_ptr<Context> ctx_;
};
OwnCluster* RedisCluster::cluster_ = nullptr;

}  // namespace

// The slot function against the cluster's own (CLUSTER KEYSLOT), on keys with and without tags.
TEST_F(RedisCluster, KeySlotsAreTheClustersOwn) {
  const int port = cluster_->ports()[0];
  std::vector<std::string> keys = {
      "123456789", "foo", "{user1000}.following",          "foo{}{bar}", "foo{{bar}}zap",
      "{bar",      "",    "kamera:ab:c:{0123456789abcdef}"};
  for (int i = 0; i < 200; ++i) keys.push_back(fmt::format("key:{}:{{t{}}}x", i * 7919, i % 13));
  for (const std::string& k : keys)
    EXPECT_EQ(std::to_string(redis_key_slot(k)),
              cluster_->reply_of(port, {"CLUSTER", "KEYSLOT", k}))
        << k;
  EXPECT_EQ(redis_key_slot("123456789"), 12739);  // CRC16/XMODEM check value 0x31C3
  EXPECT_EQ(redis_key_slot("{user1000}.following"), redis_key_slot("{user1000}.followers"));
}

// Entries written through one seed land on every master (keys are content ids) and are read
// back bit-identical by a tier that knows another seed only; a pipelined batch reads them all.
TEST_F(RedisCluster, EntriesSpreadOverTheMastersAndComeBackThroughAnySeed) {
  auto a = open_tier(cluster_->url(1), ctx_->model());
  ASSERT_TRUE(a && a->cluster() && a->connected());
  std::vector<std::shared_ptr<const CanonicalEntry>> es;
  for (int i = 0; i < 24; ++i) {
    es.push_back(entry(::getpid() % 1000 + i * 11));
    EXPECT_TRUE(a->save_canonical_acked(*es.back()));
  }
  std::set<int> on;
  for (auto& e : es) on.insert(cluster_->master_of(a->canonical_key(e->id)));
  EXPECT_EQ(on.size(), 3u) << "24 content ids all hashed to fewer than 3 masters";

  const std::string last =
      fmt::format("redis://:{}@127.0.0.1:{}", OwnCluster::kPassword, cluster_->ports()[5]);
  auto b = open_tier(last, ctx_->model());
  ASSERT_TRUE(b && b->cluster());
  for (auto& e : es) {
    auto back = b->load_canonical(e->id);
    ASSERT_NE(back, nullptr);
    EXPECT_TRUE(same_kv(back->kv, e->kv));
  }
  StoreTier::Batch want;
  for (auto& e : es) want.canonicals.push_back(e->id);
  want.canonicals.push_back(ChunkId{1, 2});  // a miss among them
  auto got = b->load_batch(want);
  ASSERT_EQ(got.canonicals.size(), es.size() + 1);
  for (size_t i = 0; i < es.size(); ++i)
    EXPECT_TRUE(got.canonicals[i] && same_kv(got.canonicals[i]->kv, es[i]->kv)) << i;
  EXPECT_EQ(got.canonicals.back(), nullptr);
  EXPECT_GT(b->fetch_cost().samples, 0);
  EXPECT_EQ(a->stats().errors + b->stats().errors, 0);
  // A delete goes through too, on the chunk's node, and holds for the other tier.
  EXPECT_EQ(a->erase_canonical(es[0]->id), TierErase::Erased);
  EXPECT_EQ(b->load_canonical(es[0]->id), nullptr);
  EXPECT_TRUE(b->tombstoned(es[0]->id));
}

// A patch saved with its context: the chunk's contexts come back in one pipelined batch (none for
// a chunk without), for the nearest-context choice of another server, and go with a delete.
TEST_F(RedisCluster, PatchContextsComeBackInABatchAndGoWithADelete) {
  auto a = open_tier(cluster_->url(1), ctx_->model());
  ASSERT_TRUE(a && a->cluster());
  const auto c = entry(::getpid() % 1000 + 7001), d = entry(::getpid() % 1000 + 7002);
  ASSERT_TRUE(a->save_canonical_acked(*c) && a->save_canonical_acked(*d));
  const std::vector<std::vector<ChunkId>> ctxs = {{ChunkId{1, 2}, ChunkId{3, 4}}, {ChunkId{5, 6}}};
  for (const auto& ante : ctxs) {
    PatchEntry p{PatchKey::make(c->id, ante, PatchOptions{}), Patch{}, ante};
    EXPECT_TRUE(a->save_patch_acked(p));
  }
  EXPECT_TRUE(a->save_patch_acked(PatchEntry{PatchKey::make(d->id, {}, PatchOptions{}), Patch{}}));
  const std::vector<ChunkId> ask = {c->id, d->id, ChunkId{9, 9}};
  auto got = a->load_contexts(ask);
  ASSERT_EQ(got.size(), 3u);
  std::vector<std::vector<ChunkId>> back = got[0];
  std::sort(back.begin(), back.end(),
            [](const auto& x, const auto& y) { return x.size() > y.size(); });
  EXPECT_EQ(back, ctxs);
  EXPECT_TRUE(got[1].empty());  // saved without its context
  EXPECT_TRUE(got[2].empty());  // nothing saved
  EXPECT_EQ(a->erase_canonical(c->id), TierErase::Erased);
  EXPECT_TRUE(a->load_contexts(ask)[0].empty());
  EXPECT_EQ(a->stats().errors, 0);
}

// A slot migrating from one master to another: a read of a key already moved is sent on with
// ASKING (ASK); once the slot is the other master's, the old map's read gets MOVED and follows it.
TEST_F(RedisCluster, AskAndMovedRedirectsAreFollowed) {
  RedisLink::Options o;
  o.password = OwnCluster::kPassword;
  RedisLink link({{"127.0.0.1", cluster_->ports()[0]}}, o);
  const std::string key = fmt::format("kamera-test:{{migrate-{}}}", ::getpid());
  auto set = link.run({key, {"SET", key, "value"}});
  ASSERT_TRUE(set && set->type == REDIS_REPLY_STATUS);
  const int slot = redis_key_slot(key);
  const int from = cluster_->master_of(key);
  int to = 0;
  for (int m : cluster_->masters())
    if (m != from) to = m;
  ASSERT_NE(to, 0);
  const std::string from_id = cluster_->reply_of(from, {"CLUSTER", "MYID"});
  const std::string to_id = cluster_->reply_of(to, {"CLUSTER", "MYID"});
  const std::string s = std::to_string(slot);
  EXPECT_EQ(cluster_->reply_of(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", from_id}), "OK");
  EXPECT_EQ(cluster_->reply_of(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", to_id}), "OK");
  EXPECT_EQ(cluster_->reply_of(from, {"MIGRATE", "127.0.0.1", std::to_string(to), "", "0", "5000",
                                      "AUTH", OwnCluster::kPassword, "KEYS", key}),
            "OK");
  const int64_t before = link.redirects();
  auto asked = link.run({key, {"GET", key}, true});
  ASSERT_TRUE(asked);
  EXPECT_EQ(std::string(asked->str, asked->len), "value");
  EXPECT_EQ(link.redirects(), before + 1) << "ASK";
  for (int p : cluster_->ports()) cluster_->reply_of(p, {"CLUSTER", "SETSLOT", s, "NODE", to_id});
  OwnCluster::wait_for([&] { return cluster_->master_of(key) == to; }, 5000);
  auto moved = link.run({key, {"GET", key}, true});
  ASSERT_TRUE(moved);
  EXPECT_EQ(std::string(moved->str, moved->len), "value");
  EXPECT_EQ(link.redirects(), before + 2) << "MOVED";
  auto again = link.run({key, {"GET", key}, true});  // the map is fixed: no redirect
  EXPECT_EQ(link.redirects(), before + 2);
  link.run({key, {"DEL", key}});
}

// The partition: every node stopped (SIGSTOP). Loads miss within the command timeout and then at
// once (each node backs off), saves are dropped unacknowledged; when the nodes come back, the
// tier reconnects and reads what was written before.
TEST_F(RedisCluster, APartitionedClusterIsAMissNotAHang) {
  auto t = open_tier(cluster_->url(), ctx_->model());
  ASSERT_TRUE(t);
  auto e = entry(::getpid() % 1000 + 7);
  ASSERT_TRUE(t->save_canonical_acked(*e));
  for (int p : cluster_->ports()) cluster_->signal(p, SIGSTOP);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(t->load_canonical(e->id), nullptr);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(t->load_canonical(e->id), nullptr);
  EXPECT_FALSE(t->save_canonical_acked(*entry(3)));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int p : cluster_->ports()) cluster_->signal(p, SIGCONT);
  EXPECT_LT(s, 3.0) << "22 commands against a stopped cluster";
  EXPECT_GT(t->stats().errors, 0);
  std::shared_ptr<const CanonicalEntry> back;
  OwnCluster::wait_for([&] { return (back = t->load_canonical(e->id)) != nullptr; }, 5000);
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(same_kv(back->kv, e->kv));
}

// A master killed while a writer stores entries with WAIT 1: its replica takes over within the
// failover time; every entry the tier acknowledged is read back bit-identical afterwards, no
// write blocks longer than a bounded retry, and nothing read is wrong (the MAC and id checks
// discard anything else: zero discarded).
TEST(RedisClusterFailover, AKilledMastersReplicaServesEveryAcknowledgedEntry) {
  OwnCluster cluster;
  if (!cluster.ok()) GTEST_SKIP() << cluster.why();
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  auto t = open_tier(cluster.url(), ctx->model(), /*wait=*/1);
  ASSERT_TRUE(t && t->cluster());
  std::vector<std::shared_ptr<const CanonicalEntry>> acked;
  std::atomic<bool> stop{false};
  double worst_s = 0;
  int attempts = 0;
  std::thread writer([&] {
    for (int i = 0; !stop && i < 400; ++i, ++attempts) {
      auto e = ctx->cache().canonical(
          ChunkContent::from_tokens({3, 1, ::getpid() % 200 + 20, i % 300 + 10, i / 300 + 5}));
      if (!e.ok()) continue;
      const auto t0 = std::chrono::steady_clock::now();
      const bool ok = t->save_canonical_acked(**e);
      worst_s = std::max(
          worst_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (ok) acked.push_back(*e);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const int victim = cluster.masters()[0];
  const auto before = cluster.slots(cluster.ports()[0]);
  const auto on_victim = [&](const ChunkId& id) {
    const int slot = redis_key_slot(t->canonical_key(id));
    for (const auto& [lo, hi, port] : before)
      if (slot >= lo && slot <= hi) return port == victim;
    return false;
  };
  const bool took_over = cluster.kill_and_wait_failover(victim);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  writer.join();
  ASSERT_TRUE(took_over) << "no replica took over within 15 s";
  EXPECT_GT(acked.size(), 20u);
  EXPECT_LT(worst_s, 2.5) << "a write blocked past its bounded retry";
  int on_victim_before = 0;
  for (auto& e : acked) {
    auto back = t->load_canonical(e->id);
    ASSERT_NE(back, nullptr) << "an acknowledged entry is lost: on the killed master "
                             << on_victim(e->id) << ", errors " << t->stats().errors
                             << ", redirects " << t->redirects() << ", slot "
                             << redis_key_slot(t->canonical_key(e->id)) << ", now on "
                             << cluster.master_of(t->canonical_key(e->id));
    EXPECT_TRUE(same_kv(back->kv, e->kv));
    on_victim_before += on_victim(e->id);
  }
  EXPECT_GT(on_victim_before, 0) << "no acknowledged entry was on the killed master";
  EXPECT_EQ(t->stats().discarded, 0);
  EXPECT_GT(attempts, int(acked.size()) - 1);
  RecordProperty("acked", int(acked.size()));
  RecordProperty("acked_on_killed_master", on_victim_before);
  RecordProperty("attempts", attempts);
}
