// The disk tier trusts nothing it finds in its directory (issue 24, item 2): a directory, FIFO or
// symbolic link named like an entry, an oversized or a sparse file are misses, discarded and
// counted, never an exception, never a blocked lookup, never read whole into memory. The memory
// tier never holds its lock while a slower tier does I/O. Deletes hold (item 3): on disk the
// tombstone survives a restart; on disk, in Redis and in memory the chunk's patches and linked
// image embeddings go with it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "cache/chunk_cache.h"
#include "store/disk_tier.h"
#include "store/redis_tier.h"
#include "support/raw_http.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

using namespace kamera;
using namespace std::chrono_literals;

namespace {

const std::string kKey = "the server's store key, 32 bytes";

std::string fresh_dir(const std::string& name) {
  const std::string d = unique_temp("kamera-untrusted-") + name + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

ChunkContent tokens(std::vector<int32_t> ids) {
  return ChunkContent::from_tokens(std::move(ids));
}

// A patch entry (no factors) of chunk `c` behind antecedents `a`, and an image entry.
PatchEntry patch_of(const ChunkId& c, uint64_t a = 7) {
  return PatchEntry{PatchKey{c, ChunkId{a, a}, 2, "all", false, DType::F32, false}, Patch{}};
}

ImageEntry image_of(uint64_t k) {
  ImageEntry img{ChunkId{k, k}, {}};
  img.placed.embeddings = {0.5f, 0.25f};
  img.placed.dim = 2;
  img.placed.layout = {Pos{0, 0, 0}};
  return img;
}

// Lets a reader blocked in open() on the FIFO go (it then reads end of file).
void unblock_fifo(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) ::close(fd);
}

}  // namespace

// A directory, a FIFO, a symbolic link (to a valid entry) and a sparse 512 MiB file, each named
// like a canonical entry: every lookup misses at once (the FIFO one used to block forever, the
// directory one threw), each is discarded and counted, and the sparse one is never read (it used
// to be read whole into memory). The entry left alone still loads.
TEST(DiskUntrusted, NonEntriesNamedLikeEntriesAreMissesNeverBlocking) {
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  const std::string dir = fresh_dir("files"), outside = dir + "-outside";
  std::vector<std::shared_ptr<const CanonicalEntry>> e;
  for (int i = 0; i < 5; ++i) e.push_back(*ctx->cache().canonical(tokens({9 + i, 4, 4, 2})));
  std::vector<std::string> path;
  {
    auto tier = DiskTier::open(dir, m.fingerprint, m.kv_layout(), {kKey, 0});
    ASSERT_TRUE(tier.ok()) << tier.message();
    for (const auto& x : e) {
      (*tier)->save_canonical(*x);
      path.push_back((*tier)->canonical_path(x->id));
    }
  }
  std::filesystem::create_directories(outside);
  std::filesystem::copy_file(path[2], outside + "/entry");
  for (int i = 0; i < 4; ++i) std::filesystem::remove(path[i]);
  std::filesystem::create_directory(path[0]);
  ASSERT_EQ(::mkfifo(path[1].c_str(), 0644), 0);
  std::filesystem::create_symlink(outside + "/entry", path[2]);
  std::ofstream(path[3]).close();
  std::filesystem::resize_file(path[3], size_t(512) << 20);  // holes only

  auto tier = DiskTier::open(dir, m.fingerprint, m.kv_layout(), {kKey, 0});  // a restart
  ASSERT_TRUE(tier.ok()) << tier.message();
  rawhttp::reset_peak_rss();
  const int64_t rss0 = rawhttp::proc_kb("VmRSS");
  for (int i = 0; i < 4; ++i) {
    auto got = std::async(std::launch::async, [&, i] {
      try {
        return (*tier)->load_canonical(e[i]->id) == nullptr ? std::string("miss")
                                                            : std::string("served");
      } catch (const std::exception& x) {
        return std::string("threw: ") + x.what();
      }
    });
    if (got.wait_for(5s) != std::future_status::ready) unblock_fifo(path[1]);
    EXPECT_EQ(got.wait_for(5s), std::future_status::ready) << "lookup " << i << " blocked";
    EXPECT_EQ(got.get(), "miss") << "lookup " << i;
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path[i])))
        << path[i] << " was not discarded";
  }
  const int64_t grown_mb = (rawhttp::proc_kb("VmHWM") - rss0) / 1024;
  if (rawhttp::kRssMeaningful) {
    EXPECT_LT(grown_mb, 64) << "the sparse entry was read";
  }
  EXPECT_EQ((*tier)->stats().discarded, 4);
  EXPECT_TRUE(std::filesystem::exists(outside + "/entry"));  // a link's target is not touched
  EXPECT_NE((*tier)->load_canonical(e[4]->id), nullptr);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(outside);
}

// A file over the entry size limit is discarded unread; one within it is served. The server sets
// the limit from the model (DiskTierOptions::max_entry_bytes; entry_size_limit).
TEST(DiskUntrusted, EntriesOverTheSizeLimitAreDiscardedUnread) {
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto small = *ctx->cache().canonical(tokens({3, 1, 4}));
  auto big = *ctx->cache().canonical(tokens({2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9, 0, 4, 5}));
  const size_t limit = serialize_canonical(*small, m.fingerprint, kKey).size();
  EXPECT_GT(serialize_canonical(*big, m.fingerprint, kKey).size(), limit);
  // the model's own limit admits every entry it can make (here: a chunk of the whole context)
  EXPECT_GE(entry_size_limit(m.kv_layout(), 16, m.cfg.dim),
            serialize_canonical(*big, m.fingerprint, kKey).size());
  const std::string dir = fresh_dir("limit");
  DiskTierOptions o{kKey, 0, limit};
  auto tier = DiskTier::open(dir, m.fingerprint, m.kv_layout(), o);
  ASSERT_TRUE(tier.ok()) << tier.message();
  (*tier)->save_canonical(*small);
  (*tier)->save_canonical(*big);
  EXPECT_NE((*tier)->load_canonical(small->id), nullptr);
  EXPECT_EQ((*tier)->load_canonical(big->id), nullptr);
  EXPECT_EQ((*tier)->stats().discarded, 1);
  EXPECT_FALSE(std::filesystem::exists((*tier)->canonical_path(big->id)));
  std::filesystem::remove_all(dir);
}

namespace {

// A tier whose canonical loads wait until released: a slow disk or a stalled Redis.
class StalledTier : public StoreTier {
 public:
  std::string name() const override { return "stalled"; }
  std::shared_ptr<const CanonicalEntry> load_canonical(const ChunkId&) override {
    std::unique_lock<std::mutex> lock(mu_);
    stalled_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, 10s, [&] { return released_; });
    return nullptr;
  }
  std::shared_ptr<const PatchEntry> load_patch(const PatchKey&) override { return nullptr; }
  bool save_canonical(const CanonicalEntry&) override { return true; }
  void save_patch(const PatchEntry&) override {}
  TierErase erase_canonical(const ChunkId&) override { return TierErase::Absent; }
  Stats stats() const override { return {}; }
  void wait_stalled() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return stalled_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stalled_ = false, released_ = false;
};

}  // namespace

// While one lookup waits on a stalled tier, the memory tier keeps answering: a hit, an insert and
// a delete each finish in well under a second (the store's lock used to be held across the tier).
TEST(DiskUntrusted, TheStoreLockIsNotHeldAcrossTierIo) {
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  auto a = *ctx->cache().canonical(tokens({5, 6, 7})), b = *ctx->cache().canonical(tokens({8, 9}));
  ChunkStore store(size_t(1) << 28);
  auto stalled = std::make_shared<StalledTier>();
  store.put_canonical(a);
  store.add_tier(stalled);
  std::thread slow([&] { store.find_canonical(ChunkId{1, 2}); });
  stalled->wait_stalled();
  auto other = std::async(std::launch::async, [&] {
    const bool hit = store.find_canonical(a->id) != nullptr;
    store.put_canonical(b);
    store.erase_canonical(b->id);
    return hit;
  });
  const bool answered = other.wait_for(2s) == std::future_status::ready;
  stalled->release();
  slow.join();
  EXPECT_TRUE(answered) << "the memory tier waited for the stalled tier";
  EXPECT_TRUE(other.get());
}

// A delete on disk: the tombstone is written first and survives a restart; the canonical, its
// patches and the image embeddings linked to it are gone; a write-back of any of them after the
// delete (this process or a restarted one) is dropped; an explicit revive lifts it.
TEST(DiskUntrusted, DeletesTakePatchesAndImagesAndSurviveARestart) {
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto c = *ctx->cache().canonical(tokens({4, 8, 15, 16, 23, 42}));
  auto keep = *ctx->cache().canonical(tokens({1, 1, 2, 3, 5}));
  const PatchEntry p = patch_of(c->id), q = patch_of(keep->id);
  const ImageEntry img = image_of(42);
  const std::string dir = fresh_dir("delete");
  {
    auto tier = *DiskTier::open(dir, m.fingerprint, m.kv_layout(), {kKey, 0});
    for (auto* e : {c.get(), keep.get()}) tier->save_canonical(*e);
    tier->save_patch(p);
    tier->save_patch(q);
    tier->save_image(img);
    tier->link_image(c->id, img.key);
    ASSERT_NE(tier->load_patch(p.key), nullptr);
    EXPECT_EQ(tier->erase_canonical(c->id), TierErase::Erased);
    EXPECT_EQ(tier->erase_canonical(c->id), TierErase::Absent);
    EXPECT_EQ(tier->load_canonical(c->id), nullptr);
    EXPECT_EQ(tier->load_patch(p.key), nullptr);
    EXPECT_EQ(tier->load_image(img.key), nullptr);
    tier->save_patch(p);  // in flight when the delete ran
    EXPECT_EQ(tier->load_patch(p.key), nullptr);
  }
  int left = 0;  // files of the deleted chunk or its image, on disk
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string name = f.path().filename().string();
    left += name.find(c->id.hex()) != std::string::npos &&
            f.path().parent_path().filename() != "tombstone";
    left += name.find(img.key.hex()) != std::string::npos;
  }
  EXPECT_EQ(left, 0);
  auto tier = *DiskTier::open(dir, m.fingerprint, m.kv_layout(), {kKey, 0});  // a restart
  EXPECT_TRUE(tier->tombstoned(c->id));
  tier->save_canonical(*c);
  EXPECT_EQ(tier->load_canonical(c->id), nullptr);
  EXPECT_NE(tier->load_canonical(keep->id), nullptr);  // the other chunk and its patch stay
  EXPECT_NE(tier->load_patch(q.key), nullptr);
  tier->revive_canonical(c->id);
  tier->save_canonical(*c);
  EXPECT_NE(tier->load_canonical(c->id), nullptr);
  std::filesystem::remove_all(dir);
}

// In Redis one script takes the canonical, every patch of the chunk and its linked image, and
// leaves the tombstone; a write-back after it (a patch in flight, an image linked late) is
// dropped, and a patch written without the set (by an older build) is not served while the
// tombstone lives. Another chunk's patch stays.
TEST(DiskUntrusted, RedisDeletesTakePatchesAndImages) {
  redisContext* rc = nullptr;
  {
    timeval tv{0, 200000};
    rc = redisConnectWithTimeout("127.0.0.1", 6379, tv);
  }
  if (!rc || rc->err) {
    if (rc) redisFree(rc);
    GTEST_SKIP() << "no Redis on 127.0.0.1:6379 (CI starts redis-server)";
  }
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto c = *ctx->cache().canonical(tokens({6, 2, ::getpid() % 300 + 20, 8}));
  auto keep = *ctx->cache().canonical(tokens({6, 3, ::getpid() % 300 + 20, 9}));
  RedisTier::Options o;
  o.key = kKey;
  auto t = *RedisTier::open("redis://127.0.0.1:6379/6", m.fingerprint, m.kv_layout(), o);
  const std::string pre = fmt::format("kamera:{:016x}{:016x}:", m.fingerprint[0], m.fingerprint[1]);
  auto exists = [&](const std::string& k) {
    auto* r = static_cast<redisReply*>(redisCommand(rc, "EXISTS %s", (pre + k).c_str()));
    const bool yes = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (r) freeReplyObject(r);
    return yes;
  };
  freeReplyObject(redisCommand(rc, "SELECT 6"));
  const PatchEntry p1 = patch_of(c->id, 1), p2 = patch_of(c->id, 2), q = patch_of(keep->id);
  const ImageEntry img = image_of(::getpid());
  t->save_canonical(*c);
  for (const auto* p : {&p1, &p2, &q}) t->save_patch(*p);
  t->save_image(img);
  t->link_image(c->id, img.key);
  ASSERT_TRUE(exists("c:{" + c->id.hex() + "}") && exists("i:{" + img.key.hex() + "}"));
  EXPECT_EQ(t->erase_canonical(c->id), TierErase::Erased);
  EXPECT_FALSE(exists("c:{" + c->id.hex() + "}"));
  EXPECT_FALSE(exists("p:{" + c->id.hex() + "}" + patch_key_name(p1.key)) ||
               exists("p:{" + c->id.hex() + "}" + patch_key_name(p2.key)));
  EXPECT_FALSE(exists("i:{" + img.key.hex() + "}"));
  EXPECT_TRUE(t->tombstoned(c->id));
  EXPECT_NE(t->load_patch(q.key), nullptr);
  t->save_patch(p1);
  EXPECT_FALSE(exists("p:{" + c->id.hex() + "}" + patch_key_name(p1.key)));
  t->save_image(img);
  t->link_image(c->id, img.key);  // an encode that finished after the delete
  EXPECT_FALSE(exists("i:{" + img.key.hex() + "}"));
  const std::string legacy = t->patch_key(p2.key);
  freeReplyObject(redisCommand(rc, "SET %b %b", legacy.data(), legacy.size(),
                               serialize_patch(p2, m.fingerprint, kKey).data(),
                               serialize_patch(p2, m.fingerprint, kKey).size()));
  EXPECT_EQ(t->load_patch(p2.key), nullptr);
  t->revive_canonical(c->id);
  for (const std::string& k : {t->tombstone_key(c->id), t->patch_key(p2.key), t->patch_key(q.key),
                               t->canonical_key(keep->id), pre + "ps:{" + keep->id.hex() + "}",
                               pre + "ps:{" + c->id.hex() + "}"})
    freeReplyObject(redisCommand(rc, "DEL %s", k.c_str()));
  redisFree(rc);
}

// The memory tier: a delete drops the chunk's patches and the embeddings of the images linked to
// it; an image linked after the delete is dropped at once.
TEST(DiskUntrusted, MemoryDeletesTakePatchesAndImages) {
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  auto c = *ctx->cache().canonical(tokens({1, 2, 3, 4, 5}));
  ChunkStore store(size_t(1) << 28);
  store.put_canonical(c);
  store.put_patch(std::make_shared<const PatchEntry>(patch_of(c->id)));
  store.put_image(std::make_shared<const ImageEntry>(image_of(5)));
  store.put_image(std::make_shared<const ImageEntry>(image_of(6)));
  store.link_image(c->id, ChunkId{5, 5});
  const ChunkStore::Erase r = store.erase_canonical(c->id);
  EXPECT_TRUE(r.found);
  EXPECT_TRUE(r.pending.empty());
  EXPECT_EQ(store.find_patch(patch_of(c->id).key), nullptr);
  EXPECT_EQ(store.find_image(ChunkId{5, 5}), nullptr);
  EXPECT_NE(store.find_image(ChunkId{6, 6}), nullptr);
  store.link_image(c->id, ChunkId{6, 6});
  EXPECT_EQ(store.find_image(ChunkId{6, 6}), nullptr);
  EXPECT_FALSE(store.erase_canonical(c->id).found);
}
