// An upload's acknowledgement means its entry is durable (issue 46, finding 7): with a file-size
// limit on the server's process (RLIMIT_FSIZE, SIGXFSZ ignored: writes past it fail with EFBIG,
// as on a full disk), every chunk upload answered 201 is served after a restart on the same
// --store-dir, every other one is answered 507 `insufficient_storage` and leaves nothing behind:
// no file, no temporary, not served from memory. The probe's finding before: 10 of 18 such
// chunks acknowledged 201 were gone after a restart.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>

#include "support/temp_path.h"
#include "support/test_server.h"

using json = nlohmann::json;

namespace {

// Chunk text of about `words` tokens (a different text for each i).
std::string chunk_text(int i, int words) {
  std::string s = fmt::format("Chunk {} of the durability test:", i);
  for (int w = 0; w < words; ++w) s += fmt::format(" w{}", (i * 31 + w) % 97);
  return s;
}

kamera::ServerOptions disk_options(const std::string& dir) {
  kamera::ServerOptions o;
  o.store_dir = dir;
  o.store_key = "the durability test's key, 32 B";
  return o;
}

// Holds a soft file-size limit on this process (the server runs in it), SIGXFSZ ignored; both
// restored when it goes.
struct FileSizeLimit {
  rlimit old{};
  void (*old_handler)(int) = nullptr;
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old);
    old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit now = old;
    now.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &now), 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
};

int files_in(const std::string& dir, const std::string& part) {
  int n = 0;
  for (const auto& d : std::filesystem::directory_iterator(dir))
    n += d.path().filename().string().find(part) != std::string::npos;
  return n;
}

}  // namespace

TEST(StoreDurable, AnAcknowledgedUploadSurvivesARestartOrIsRefused507) {
  const std::string dir = unique_temp("durable-store");
  std::filesystem::remove_all(dir);
  constexpr int kChunks = 18;
  std::vector<std::string> ids(kChunks);
  std::vector<int> status(kChunks);
  {
    tiny::TestServer s(disk_options(dir));
    // The file size of the middle chunk's entry: the limit lets the smaller half through.
    int st = 0;
    const json mid =
        s.post("/v1/chunks", {{"text", chunk_text(kChunks / 2, 4 * (kChunks / 2))}}, &st);
    ASSERT_EQ(st, 201);
    const auto limit = std::filesystem::file_size(
        fmt::format("{}/canonical/{}.kce", dir, mid["id"].get<std::string>()));
    std::filesystem::remove(fmt::format("{}/canonical/{}.kce", dir, mid["id"].get<std::string>()));
    FileSizeLimit cap(limit);
    for (int i = 0; i < kChunks; ++i) {
      if (i == kChunks / 2) continue;  // uploaded above
      const json r = s.post("/v1/chunks", {{"text", chunk_text(i, 4 * i)}}, &status[i]);
      if (status[i] == 201) ids[i] = r["id"].get<std::string>();
      if (status[i] != 201) {
        EXPECT_EQ(status[i], 507) << r.dump();
        EXPECT_EQ(r["error"].value("code", ""), "insufficient_storage") << r.dump();
      }
    }
    EXPECT_EQ(files_in(dir + "/canonical", ".tmp."), 0) << "a temporary was left behind";
  }
  int acked = 0, refused = 0, lost = 0;
  tiny::TestServer again(disk_options(dir));  // a restart on the same directory
  for (int i = 0; i < kChunks; ++i) {
    if (i == kChunks / 2) continue;
    if (status[i] != 201) {
      ++refused;
      continue;
    }
    ++acked;
    int st = 0;
    again.get("/v1/chunks/" + ids[i], &st);
    lost += st != 200;
  }
  std::printf(
      "[measure] file-size limit: %d uploads acknowledged 201, %d gone after a restart; "
      "%d refused\n",
      acked, lost, refused);
  EXPECT_EQ(lost, 0) << "acknowledged uploads were not durable";
  EXPECT_GT(acked, 0);
  EXPECT_GT(refused, 0) << "the limit refused nothing: the test tests nothing";
  // Nothing half-written: every file left is an entry the restarted server serves.
  EXPECT_EQ(files_in(dir + "/canonical", ".kce"), acked);
}

// A refused upload is not served from memory either; once the store can take it, the same upload
// is acknowledged, and a repeat of a durable entry needs no write.
TEST(StoreDurable, ARefusedUploadIsNotServedFromMemory) {
  const std::string dir = unique_temp("durable-memory");
  std::filesystem::remove_all(dir);
  const json body = {{"text", chunk_text(1, 40)}};
  tiny::TestServer s(disk_options(dir));
  int st = 0;
  json r;
  {
    FileSizeLimit cap(64);  // smaller than any entry
    r = s.post("/v1/chunks", body, &st);
  }
  EXPECT_EQ(st, 507) << r.dump();
  EXPECT_EQ(files_in(dir + "/canonical", ""), 0) << "the refused upload left a file";
  const json ok = s.post("/v1/chunks", body, &st);  // the limit gone
  ASSERT_EQ(st, 201) << ok.dump();
  EXPECT_TRUE(ok.value("formed", false)) << "the refused entry was kept in memory";
  const std::string id = ok["id"].get<std::string>();
  EXPECT_TRUE(std::filesystem::exists(fmt::format("{}/canonical/{}.kce", dir, id)));
  {
    FileSizeLimit cap(64);
    s.post("/v1/chunks", body, &st);  // held durably already: no write, acknowledged
    EXPECT_EQ(st, 201);
  }
}
