// The disk tier trusts nothing it finds in its directory (issue 24, item 2): a directory, FIFO or
// symbolic link named like an entry, an oversized or a sparse file are misses, discarded and
// counted, never an exception, never a blocked lookup, never read whole into memory. The memory
// tier never holds its lock while a slower tier does I/O.
#include <fcntl.h>
#include <gtest/gtest.h>
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
  void save_canonical(const CanonicalEntry&) override {}
  void save_patch(const PatchEntry&) override {}
  void erase_canonical(const ChunkId&) override {}
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
