// Image embeddings in the store's slower tiers (store/store.h ImageEntry): the Redis tier keeps
// them, sealed with the store key like chunk entries (one store writes, another reads them back
// bit for bit; a tampered entry is refused and deleted), and the server finds them there: a
// restarted `kamera serve --mmproj` on the same --store-dir (or Redis) answers a picture it has
// seen without running the vision tower (usage.images.encoded, kamera_images_encoded_total).
// The Redis cases need a redis-server on 127.0.0.1:6379 (CI starts one) and skip without it.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <httplib.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "server/server.h"
#include "store/redis_tier.h"
#include "support/base64.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "vision/qwen_vision.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

const std::string kKey = "the server's store key, 32 bytes";
const std::string kRedis = "redis://127.0.0.1:6379/5";

redisContext* redis_or_null() {
  timeval tv{0, 200000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", 6379, tv);
  if (c && !c->err) return c;
  if (c) redisFree(c);
  return nullptr;
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

// A blob rewritten without the key: one payload byte changed and the XXH3 checksum recomputed,
// the MAC left as it was (the sealed layout of store/entry_codec.cpp: magic, version, kind,
// fingerprint, length, checksum, payload, MAC).
std::string tamper(std::string blob) {
  const size_t header = 4 + 4 + 4 + 16 + 8 + 8, mac = 32;
  const size_t payload_end = blob.size() - mac;
  blob[payload_end - 2] ^= 0x01;
  const uint64_t sum = XXH3_64bits(blob.data() + header, payload_end - header);
  std::memcpy(blob.data() + header - 8, &sum, 8);
  return blob;
}

// An image entry under a key unique to this process: 2 slices x 2 x 3 rows of width 64.
ImageEntry sample_entry() {
  ImageEntry e;
  e.key = {0x1234'5678'9abc'def0ull ^ uint64_t(::getpid()), 0x0fed'cba9'8765'4321ull};
  e.placed.dim = 64;
  for (int t = 0; t < 2; ++t)
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 3; ++c) e.placed.layout.push_back({t, r, c});
  e.placed.embeddings.resize(e.placed.layout.size() * 64);
  for (size_t i = 0; i < e.placed.embeddings.size(); ++i)
    e.placed.embeddings[i] = float(std::sin(0.37 * double(i))) * 3.0f;
  return e;
}

std::shared_ptr<RedisTier> open_redis(const Model& m, const std::string& key = kKey) {
  RedisTier::Options o;
  o.key = key;
  o.ttl_s = 600;
  auto t = RedisTier::open(kRedis, m.fingerprint, m.kv_layout(), o);
  EXPECT_TRUE(t.ok()) << t.message();
  return t.ok() ? *t : nullptr;
}

TEST(VlStoreTiers, RedisKeepsImageEntriesSealed) {
  redisContext* rc = redis_or_null();
  if (!rc) GTEST_SKIP() << "no Redis on 127.0.0.1:6379 (CI starts redis-server)";
  std::shared_ptr<const Model> model = tiny::load(tiny::model_path("qwen2vl"));
  const ImageEntry e = sample_entry();
  const std::string rkey = fmt::format("kamera:{:016x}{:016x}:i:{{{}}}", model->fingerprint[0],
                                       model->fingerprint[1], e.key.hex());
  redis_cmd(rc, {"SELECT", "5"});
  redis_cmd(rc, {"DEL", rkey});
  {
    ChunkStore writer(size_t(1) << 20);
    writer.add_tier(open_redis(*model));
    writer.put_image(std::make_shared<const ImageEntry>(e));
  }
  const std::string ttl = redis_cmd(rc, {"TTL", rkey});
  ASSERT_FALSE(ttl.empty());
  EXPECT_GT(std::stoi(ttl), 0);  // written, and expiring like the chunk entries
  ChunkStore reader(size_t(1) << 20);
  auto tier = open_redis(*model);
  reader.add_tier(tier);
  auto got = reader.find_image(e.key);
  ASSERT_TRUE(got);
  EXPECT_EQ(reader.stats().image_tier_hits, 1);
  EXPECT_EQ(got->key, e.key);
  EXPECT_EQ(got->placed.dim, e.placed.dim);
  EXPECT_EQ(got->placed.layout, e.placed.layout);
  ASSERT_EQ(got->placed.embeddings.size(), e.placed.embeddings.size());
  EXPECT_EQ(std::memcmp(got->placed.embeddings.data(), e.placed.embeddings.data(),
                        e.placed.embeddings.size() * sizeof(float)),
            0);

  // a store with another key cannot read it (and discards it as forged)...
  const std::string blob = redis_cmd(rc, {"GET", rkey});
  ASSERT_FALSE(blob.empty());
  auto stranger = open_redis(*model, "an attacker's key of 32 bytes...");
  EXPECT_FALSE(stranger->load_image(e.key));
  EXPECT_EQ(stranger->stats().forged, 1);
  // ...and a tampered entry (checksum recomputed, MAC not) is refused, counted and deleted
  redis_cmd(rc, {"SET", rkey, tamper(blob)});
  auto fresh = open_redis(*model);
  EXPECT_FALSE(fresh->load_image(e.key));
  EXPECT_EQ(fresh->stats().forged, 1);
  EXPECT_EQ(fresh->stats().discarded, 1);
  EXPECT_EQ(redis_cmd(rc, {"EXISTS", rkey}), "0");
  // the intact blob, put back, is served again
  redis_cmd(rc, {"SET", rkey, blob});
  auto again = fresh->load_image(e.key);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->placed.embeddings, e.placed.embeddings);
  redis_cmd(rc, {"DEL", rkey});
  redisFree(rc);
}

// --- the server ---

const std::string kPng =
    std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_preprocess/rgb_61x47.png";

std::string png_url() {
  std::ifstream f(kPng, std::ios::binary);
  return "data:image/png;base64," + base64(std::string(std::istreambuf_iterator<char>(f), {}));
}

// Random weights seeded by the process id: the image key (and every chunk id after it) is this
// run's own, so runs sharing a Redis never see each other's entries.
std::string tower_path() {
  static const std::string path = [] {
    const std::string p =
        unique_temp("kamera-vl-store-tiers-mmproj-") + std::to_string(::getpid()) + ".gguf";
    EXPECT_TRUE(
        QwenVisionModel::random(*qwen_vision_preset("qwen2vl", "tiny"), uint64_t(::getpid()))
            .write_gguf(p, DType::F32)
            .ok());
    return p;
  }();
  return path;
}

struct Answer {
  int status = 0;
  json usage;
  std::string text;
  double encoded_metric = -1;
};

// One chat request with the image against a fresh server (a "restart" per call).
Answer ask_fresh_server(std::shared_ptr<const Model> model, ServerOptions o) {
  o.port = 0;
  o.threads = 1;
  o.mmproj = tower_path();
  Server s(model, o);
  auto st = s.start();
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return {};
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  const json body = {{"messages",
                      {{{"role", "user"},
                        {"content",
                         {{{"type", "image_url"}, {"image_url", {{"url", png_url()}}}},
                          {{"type", "text"}, {"text", "What is it?"}}}}}}},
                     {"max_tokens", 4},
                     {"temperature", 0}};
  Answer a;
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return a;
  a.status = r->status;
  const json j = json::parse(r->body, nullptr, false);
  if (j.is_object() && j.contains("usage")) a.usage = j["usage"];
  if (j.is_object() && j.contains("choices"))
    a.text = j["choices"][0]["message"]["content"].get<std::string>();
  if (auto m = c.Get("/metrics")) {
    const std::string name = "\nkamera_images_encoded_total ";
    const size_t at = m->body.find(name);
    if (at != std::string::npos) a.encoded_metric = std::stod(m->body.substr(at + name.size()));
  }
  return a;
}

void expect_restart_reads_back(std::shared_ptr<const Model> model, const ServerOptions& o) {
  const Answer first = ask_fresh_server(model, o);
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.usage["images"]["encoded"], 1);
  EXPECT_EQ(first.encoded_metric, 1);
  const Answer second = ask_fresh_server(model, o);  // a restarted server on the same tiers
  ASSERT_EQ(second.status, 200);
  EXPECT_EQ(second.usage["images"]["encoded"], 0);
  EXPECT_EQ(second.usage["images"]["cached_embeddings"], 1);
  EXPECT_EQ(second.encoded_metric, 0);  // the tower never ran in this process
  EXPECT_EQ(second.usage["images"]["image_tokens"], first.usage["images"]["image_tokens"]);
  EXPECT_EQ(second.text, first.text);
}

TEST(VlStoreTiers, RestartedServerReadsImageEmbeddingsFromDisk) {
  std::shared_ptr<const Model> model = tiny::load(tiny::model_path("qwen2vl"));
  const std::string dir = unique_temp("kamera-vl-store-tiers-") + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ServerOptions o;
  o.store_dir = dir;
  expect_restart_reads_back(model, o);
  size_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir + "/image"))
    files += f.is_regular_file();
  EXPECT_EQ(files, 1u);
  // without the tier (memory only) a restart encodes again: the check above can fail
  const Answer cold = ask_fresh_server(model, ServerOptions{});
  EXPECT_EQ(cold.usage["images"]["encoded"], 1);
  std::filesystem::remove_all(dir);
}

TEST(VlStoreTiers, RestartedServerReadsImageEmbeddingsFromRedis) {
  redisContext* rc = redis_or_null();
  if (!rc) GTEST_SKIP() << "no Redis on 127.0.0.1:6379 (CI starts redis-server)";
  std::shared_ptr<const Model> model = tiny::load(tiny::model_path("qwen2vl"));
  ServerOptions o;
  o.redis_url = kRedis;
  o.store_key = kKey;
  o.redis_ttl_s = 600;  // this run's entries expire
  expect_restart_reads_back(model, o);
  redisFree(rc);
}

}  // namespace
