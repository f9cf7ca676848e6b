// Image embeddings in the store's tiers (ImageEntry, store/store.h): written through to a disk
// tier, read back bit-identical by a new store on the same directory ("restart"), and a corrupt,
// forged (another store key) or foreign (another model) entry is a miss that the tier discards.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "store/disk_tier.h"
#include "support/temp_path.h"

namespace {

using namespace kamera;

constexpr Fingerprint kModel = {0x1234, 0x5678};
const std::string kKey = "image-store-test-key-0123456789abcdef";

std::shared_ptr<const ImageEntry> entry() {
  auto e = std::make_shared<ImageEntry>();
  e->key = ChunkId{0xabc, 0xdef};
  e->placed.dim = 8;
  for (int i = 0; i < 6 * 8; ++i) e->placed.embeddings.push_back(0.37f * float(i) - 5.1f);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) e->placed.layout.push_back(Pos{0, r, c});
  return e;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = unique_temp("kamera-image-store-") + name;
  std::filesystem::remove_all(dir);
  return dir;
}

std::shared_ptr<DiskTier> open_tier(const std::string& dir, const std::string& key,
                                    const Fingerprint& fp = kModel) {
  auto t = DiskTier::open(dir, fp, KvLayout{}, {key, 0});
  EXPECT_TRUE(t.ok()) << t.message();
  return t.ok() ? *t : nullptr;
}

TEST(ImageStore, RestartReadsBackBitIdentical) {
  const std::string dir = fresh_dir("restart");
  const auto e = entry();
  {
    ChunkStore store(1 << 20);
    store.add_tier(open_tier(dir, kKey));
    store.put_image(e);
    ASSERT_TRUE(store.find_image(e->key));
    EXPECT_EQ(store.stats().image_hits, 1);
  }
  ChunkStore store(1 << 20);  // a new process on the same directory
  store.add_tier(open_tier(dir, kKey));
  const auto back = store.find_image(e->key);
  ASSERT_TRUE(back);
  EXPECT_EQ(store.stats().image_tier_hits, 1);
  EXPECT_EQ(back->placed.dim, 8);
  ASSERT_EQ(back->placed.embeddings.size(), e->placed.embeddings.size());
  EXPECT_EQ(std::memcmp(back->placed.embeddings.data(), e->placed.embeddings.data(),
                        e->placed.embeddings.size() * sizeof(float)),
            0);
  EXPECT_EQ(back->placed.layout, e->placed.layout);
  EXPECT_FALSE(store.find_image(ChunkId{1, 2}));
  EXPECT_EQ(store.stats().image_misses, 1);
}

TEST(ImageStore, CorruptForgedAndForeignEntriesMiss) {
  const auto e = entry();
  {  // forged: written under another key
    const std::string dir = fresh_dir("forged");
    open_tier(dir, "someone else's key 0123456789abcdef")->save_image(*e);
    auto t = open_tier(dir, kKey);
    EXPECT_FALSE(t->load_image(e->key));
    EXPECT_EQ(t->stats().forged, 1);
    EXPECT_EQ(t->stats().discarded, 1);
  }
  {  // foreign: another model's fingerprint
    const std::string dir = fresh_dir("foreign");
    open_tier(dir, kKey, {9, 9})->save_image(*e);
    auto t = open_tier(dir, kKey);
    EXPECT_FALSE(t->load_image(e->key));
    EXPECT_EQ(t->stats().discarded, 1);
  }
  {  // corrupt: one byte flipped in the payload
    const std::string dir = fresh_dir("corrupt");
    auto t = open_tier(dir, kKey);
    t->save_image(*e);
    const std::string path = t->image_path(e->key);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char ch = 0;
    f.read(&ch, 1);
    f.seekp(100);
    ch = char(ch ^ 0x20);
    f.write(&ch, 1);
    f.close();
    EXPECT_FALSE(t->load_image(e->key));
    EXPECT_EQ(t->stats().discarded, 1);
    EXPECT_FALSE(std::filesystem::exists(path));  // discarded
  }
}

}  // namespace
