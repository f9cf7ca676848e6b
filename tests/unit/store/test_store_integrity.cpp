// Keyed integrity of the shared and persistent store tiers (docs/SERVER.md, "Store tiers"): entries
// carry an HMAC-SHA256 under the store key; a forged entry (valid XXH3, wrong or no MAC) is
// discarded, counted and deleted, never served. The disk tier sweeps crash leftovers, keeps a byte
// cap and restores its byte count at restart; a Redis key of the wrong type is a miss, not an
// outage.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <httplib.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cache/chunk_cache.h"
#include "server/server.h"
#include "store/disk_tier.h"
#include "store/redis_tier.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

const std::string kKey = "the server's store key, 32 bytes";
const std::string kOtherKey = "an attacker's key of 32 bytes...";

std::string fresh_dir(const std::string& name) {
  const std::string d = unique_temp("kamera-integrity-") + name + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

ChunkContent tokens(std::vector<int32_t> ids) {
  return ChunkContent::from_tokens(std::move(ids));
}

// A blob rewritten by someone without the key: a byte of the last KV value changed (the entry
// still parses, so a checksum-only reader would serve it, as the finding saw) and the XXH3
// checksum recomputed, the MAC left as it was (version 2), or dropped (version 1).
std::string tamper(std::string blob, bool keep_mac) {
  const size_t header = 4 + 4 + 4 + 16 + 8 + 8, mac = 32;
  const size_t payload_end = blob.size() - mac;
  blob[payload_end - 2] ^= 0x01;
  const uint64_t sum = XXH3_64bits(blob.data() + header, payload_end - header);
  std::memcpy(blob.data() + header - 8, &sum, 8);
  if (keep_mac) return blob;
  const uint32_t v1 = 1;
  std::memcpy(blob.data() + 4, &v1, 4);
  return blob.substr(0, payload_end);
}

bool redis_up(redisContext** out) {
  timeval tv{0, 200000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", 6379, tv);
  if (!c || c->err) {
    if (c) redisFree(c);
    return false;
  }
  *out = c;
  return true;
}

std::string redis_cmd(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r =
      static_cast<redisReply*>(redisCommandArgv(c, int(args.size()), argv.data(), lens.data()));
  std::string out;
  if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS))
    out.assign(r->str, r->len);
  if (r && r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
  if (r) freeReplyObject(r);
  return out;
}

double metric(httplib::Client& c, const std::string& line) {
  auto m = c.Get("/metrics");
  if (!m) return -1;
  const size_t at = m->body.find("\n" + line + " ");
  return at == std::string::npos ? -1 : std::stod(m->body.substr(at + line.size() + 2));
}

}  // namespace

TEST(StoreIntegrity, KeyedEntriesRefuseForgeries) {
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  const Fingerprint fp = ctx->model().fingerprint;
  auto e = ctx->cache().canonical(tokens({5, 6, 7, 8, 9, 10}));
  ASSERT_TRUE(e.ok());
  const std::string blob = serialize_canonical(**e, fp, kKey);
  bool forged = false;
  auto back = deserialize_canonical(blob, fp, kKey, &forged);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_FALSE(forged);
  EXPECT_EQ(serialize_canonical(**back, fp, kKey), blob);
  // under another key, rewritten with a valid checksum, stripped of its MAC, or unkeyed
  for (const std::string& bad : {serialize_canonical(**e, fp, kOtherKey), tamper(blob, true),
                                 tamper(blob, false), serialize_canonical(**e, fp)}) {
    forged = false;
    EXPECT_FALSE(deserialize_canonical(bad, fp, kKey, &forged).ok());
    EXPECT_TRUE(forged);
  }
  // a reader without a key does not take keyed entries either
  EXPECT_FALSE(deserialize_canonical(blob, fp).ok());
}

TEST(StoreIntegrity, DiskTierDiscardsForgedFilesSweepsAndCaps) {
  const std::string dir = fresh_dir("disk");
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  std::vector<std::shared_ptr<const CanonicalEntry>> entries;
  for (int i = 0; i < 4; ++i) entries.push_back(*ctx->cache().canonical(tokens({5 + i, 6, 7, 8})));
  const size_t one = serialize_canonical(*entries[0], m.fingerprint, kKey).size();
  int64_t bytes = 0;
  {
    auto tier = DiskTier::open(dir, m.fingerprint, m.kv_layout(), {kKey, 0});
    ASSERT_TRUE(tier.ok()) << tier.message();
    for (int i = 0; i < 3; ++i) (*tier)->save_canonical(*entries[i]);
    bytes = (*tier)->stats().bytes;
    EXPECT_EQ(bytes, int64_t(3 * one));
  }
  // a crash leftover of a dead writer, and an entry forged under another key
  const std::string leftover = dir + "/canonical/x.kce.tmp.999999999.0";
  std::ofstream(leftover) << "half";
  std::ofstream(dir + "/canonical/" + entries[1]->id.hex() + ".kce", std::ios::binary)
      << serialize_canonical(*entries[1], m.fingerprint, kOtherKey);
  auto tier = DiskTier::open(dir, m.fingerprint, m.kv_layout(), {kKey, size_t(2.5 * one)});
  ASSERT_TRUE(tier.ok());
  EXPECT_FALSE(std::filesystem::exists(leftover));
  EXPECT_EQ((*tier)->swept_temporaries(), 1);
  EXPECT_LE((*tier)->stats().bytes, int64_t(2.5 * one));  // restored, then capped
  EXPECT_GT((*tier)->stats().bytes, 0);
  EXPECT_EQ((*tier)->load_canonical(entries[1]->id), nullptr);
  EXPECT_EQ((*tier)->stats().forged, 1);
  (*tier)->save_canonical(*entries[3]);
  (*tier)->save_canonical(*entries[1]);
  EXPECT_LE((*tier)->stats().bytes, int64_t(2.5 * one));
  EXPECT_NE((*tier)->load_canonical(entries[1]->id), nullptr);  // the newest stays
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir + "/canonical"))
    files += f.is_regular_file();
  EXPECT_EQ(int64_t(files) * int64_t(one), (*tier)->stats().bytes);
  std::filesystem::remove_all(dir);
}

TEST(StoreIntegrity, DiskTierMakesItsKeyPrivately) {
  const std::string dir = fresh_dir("key");
  auto model = tiny::load(tiny::model_path("qwen2"));
  ASSERT_TRUE(DiskTier::open(dir, model->fingerprint, model->kv_layout()).ok());
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/store.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  std::filesystem::remove_all(dir);
}

// Finding 5: a Redis entry rewritten by another client (checksum recomputed) was served. Now it
// is discarded, deleted and counted; the chunk is unknown rather than garbage.
TEST(StoreIntegrity, ForgedRedisEntryIsDiscarded) {
  redisContext* rc = nullptr;
  if (!redis_up(&rc)) GTEST_SKIP() << "no Redis on 127.0.0.1:6379 (CI starts redis-server)";
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.redis_url = "redis://127.0.0.1:6379/4";
  o.store_key = kKey;
  std::shared_ptr<const Model> model = tiny::load(tiny::model_path("qwen2"));
  const auto content = tokens({9, 8, 7, 6, 5, ::getpid() % 400 + 20});
  const ChunkId id = chunk_id(model->fingerprint, content);
  const std::string key = fmt::format("kamera:{:016x}{:016x}:c:{{{}}}", model->fingerprint[0],
                                      model->fingerprint[1], id.hex());
  redis_cmd(rc, {"SELECT", "4"});
  {
    Server a(model, o);
    ASSERT_TRUE(a.start().ok());
    httplib::Client c("127.0.0.1", a.port());
    auto up = c.Post("/v1/chunks", json{{"tokens", content.tokens}}.dump(), "application/json");
    ASSERT_TRUE(up && up->status == 201);
  }
  const std::string stored = redis_cmd(rc, {"GET", key});
  ASSERT_FALSE(stored.empty());
  redis_cmd(rc, {"SET", key, tamper(stored, true)});
  Server b(model, o);
  ASSERT_TRUE(b.start().ok());
  httplib::Client c("127.0.0.1", b.port());
  auto got = c.Get(("/v1/chunks/" + id.hex()).c_str());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 404);
  EXPECT_EQ(metric(c, "kamera_tier_forged_total{tier=\"redis\"}"), 1);
  EXPECT_EQ(redis_cmd(rc, {"EXISTS", key}), "0");  // deleted, not left for the next reader
  redisFree(rc);
}

// Finding 8: a key of the wrong type put the server into outage mode. Now it is a miss for that
// key (and deleted); the next lookups go to Redis as before.
TEST(StoreIntegrity, WrongTypeRedisKeyIsAMissNotAnOutage) {
  redisContext* rc = nullptr;
  if (!redis_up(&rc)) GTEST_SKIP() << "no Redis on 127.0.0.1:6379 (CI starts redis-server)";
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.redis_url = "redis://127.0.0.1:6379/4";
  o.store_key = kKey;
  o.redis_ttl_s = 600;
  std::shared_ptr<const Model> model = tiny::load(tiny::model_path("qwen2"));
  const auto content = tokens({4, 3, 2, 5, ::getpid() % 400 + 20});
  const ChunkId id = chunk_id(model->fingerprint, content);
  const std::string key = fmt::format("kamera:{:016x}{:016x}:c:{{{}}}", model->fingerprint[0],
                                      model->fingerprint[1], id.hex());
  redis_cmd(rc, {"SELECT", "4"});
  redis_cmd(rc, {"DEL", key});
  redis_cmd(rc, {"LPUSH", key, "not an entry"});
  Server s(model, o);
  ASSERT_TRUE(s.start().ok());
  httplib::Client c("127.0.0.1", s.port());
  auto got = c.Get(("/v1/chunks/" + id.hex()).c_str());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 404);
  EXPECT_EQ(metric(c, "kamera_tier_errors_total{tier=\"redis\"}"), 0);
  EXPECT_EQ(redis_cmd(rc, {"EXISTS", key}), "0");
  auto up = c.Post("/v1/chunks", json{{"tokens", content.tokens}}.dump(), "application/json");
  ASSERT_TRUE(up && up->status == 201);
  EXPECT_FALSE(redis_cmd(rc, {"GET", key}).empty());  // written through: Redis is in use
  const std::string ttl = redis_cmd(rc, {"TTL", key});
  EXPECT_TRUE(!ttl.empty() && std::stoi(ttl) > 0 && std::stoi(ttl) <= 600) << ttl;
  redisFree(rc);
}

// Finding 8: a garbage value (not an entry at all) was discarded but left in Redis. Now it is a
// miss, counted as a discard, and deleted for the next reader.
TEST(StoreIntegrity, GarbageRedisValueIsDeleted) {
  redisContext* rc = nullptr;
  if (!redis_up(&rc)) GTEST_SKIP() << "no Redis on 127.0.0.1:6379 (CI starts redis-server)";
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.redis_url = "redis://127.0.0.1:6379/4";
  o.store_key = kKey;
  std::shared_ptr<const Model> model = tiny::load(tiny::model_path("qwen2"));
  const auto content = tokens({6, 1, 6, 1, ::getpid() % 400 + 20});
  const ChunkId id = chunk_id(model->fingerprint, content);
  const std::string key = fmt::format("kamera:{:016x}{:016x}:c:{{{}}}", model->fingerprint[0],
                                      model->fingerprint[1], id.hex());
  redis_cmd(rc, {"SELECT", "4"});
  redis_cmd(rc, {"SET", key, "garbage, not an entry"});
  Server s(model, o);
  ASSERT_TRUE(s.start().ok());
  httplib::Client c("127.0.0.1", s.port());
  auto got = c.Get(("/v1/chunks/" + id.hex()).c_str());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 404);
  EXPECT_EQ(metric(c, "kamera_tier_discarded_total{tier=\"redis\"}"), 1);
  EXPECT_EQ(metric(c, "kamera_tier_errors_total{tier=\"redis\"}"), 0);
  EXPECT_EQ(redis_cmd(rc, {"EXISTS", key}), "0");
  redisFree(rc);
}

// Redis AUTH: with the right user and password in the URL entries are written through; with a
// wrong password the tier is an outage (counted), and the server still answers from memory.
TEST(StoreIntegrity, RedisAuthIsSent) {
  redisContext* rc = nullptr;
  if (!redis_up(&rc)) GTEST_SKIP() << "no Redis on 127.0.0.1:6379 (CI starts redis-server)";
  const std::string user = "kamera-test-" + std::to_string(::getpid());
  if (redis_cmd(rc, {"ACL", "SETUSER", user, "on", ">right-password", "~*", "+@all"}) != "OK")
    GTEST_SKIP() << "this Redis has no ACLs (Redis 6 or later is needed)";
  std::shared_ptr<const Model> model = tiny::load(tiny::model_path("qwen2"));
  auto upload = [&](const std::string& password, int salt) {
    ServerOptions o;
    o.port = 0;
    o.threads = 1;
    o.redis_url = "redis://" + user + ":" + password + "@127.0.0.1:6379/4";
    o.store_key = kKey;
    const auto content = tokens({3, 1, 4, 1, 5, salt, ::getpid() % 400 + 20});
    const ChunkId id = chunk_id(model->fingerprint, content);
    Server s(model, o);
    EXPECT_TRUE(s.start().ok());
    httplib::Client c("127.0.0.1", s.port());
    auto up = c.Post("/v1/chunks", json{{"tokens", content.tokens}}.dump(), "application/json");
    EXPECT_TRUE(up && up->status == 201);
    const std::string key = fmt::format("kamera:{:016x}{:016x}:c:{{{}}}", model->fingerprint[0],
                                        model->fingerprint[1], id.hex());
    redis_cmd(rc, {"SELECT", "4"});
    const bool stored = !redis_cmd(rc, {"GET", key}).empty();
    return std::make_pair(stored, metric(c, "kamera_tier_errors_total{tier=\"redis\"}"));
  };
  const auto [stored, errors] = upload("right-password", 9);
  EXPECT_TRUE(stored);
  EXPECT_EQ(errors, 0);
  const auto [stored_wrong, errors_wrong] = upload("wrong-password", 2);
  EXPECT_FALSE(stored_wrong);
  EXPECT_GE(errors_wrong, 1);
  redis_cmd(rc, {"ACL", "DELUSER", user});
  redisFree(rc);
}

// Finding 6 across servers: a delete leaves a tombstone in Redis that stops every later
// write-back of the chunk, from this server or another one sharing the Redis, until an explicit
// upload (on any server) revives it.
TEST(StoreIntegrity, RedisTombstoneStopsWriteBacksUntilAnUpload) {
  redisContext* rc = nullptr;
  if (!redis_up(&rc)) GTEST_SKIP() << "no Redis on 127.0.0.1:6379 (CI starts redis-server)";
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto e = ctx->cache().canonical(tokens({2, 7, 1, 8, 2, ::getpid() % 400 + 20}));
  ASSERT_TRUE(e.ok());
  const std::string url = "redis://127.0.0.1:6379/4";
  RedisTier::Options o;
  o.key = kKey;
  auto a = RedisTier::open(url, m.fingerprint, m.kv_layout(), o);
  auto b = RedisTier::open(url, m.fingerprint, m.kv_layout(), o);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string prefix =
      fmt::format("kamera:{:016x}{:016x}:", m.fingerprint[0], m.fingerprint[1]);
  const std::string key = prefix + "c:{" + (*e)->id.hex() + "}",
                    tomb = prefix + "t:{" + (*e)->id.hex() + "}";
  redis_cmd(rc, {"SELECT", "4"});
  (*a)->save_canonical(**e);
  ASSERT_EQ(redis_cmd(rc, {"EXISTS", key}), "1");
  (*a)->erase_canonical((*e)->id);
  EXPECT_EQ(redis_cmd(rc, {"EXISTS", key}), "0");
  EXPECT_EQ(redis_cmd(rc, {"EXISTS", tomb}), "1");
  (*a)->save_canonical(**e);  // an in-flight write-back on this server
  (*b)->save_canonical(**e);  // and on another one
  EXPECT_EQ(redis_cmd(rc, {"EXISTS", key}), "0");
  EXPECT_EQ((*b)->load_canonical((*e)->id), nullptr);
  // An explicit upload through another server's store revives the chunk everywhere.
  ChunkStore store(size_t(1) << 28);
  store.add_tier(*b);
  store.revive_canonical((*e)->id);
  EXPECT_EQ(redis_cmd(rc, {"EXISTS", tomb}), "0");
  (*b)->save_canonical(**e);
  EXPECT_EQ(redis_cmd(rc, {"EXISTS", key}), "1");
  EXPECT_NE((*a)->load_canonical((*e)->id), nullptr);
  redis_cmd(rc, {"DEL", key});
  redisFree(rc);
}
