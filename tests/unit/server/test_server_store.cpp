// The server's store tiers against what issue 24 found, on loopback: files in --store-dir that
// are not entries are misses (no 500, no crash, no blocked lookup, no 2 GiB read).
#include <gtest/gtest.h>
#include <httplib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "server/server.h"
#include "support/raw_http.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

struct Served {
  std::shared_ptr<const Model> model;
  std::unique_ptr<Server> server;
  explicit Served(ServerOptions o) {
    model = tiny::load(tiny::model_path("qwen2"));
    o.port = 0;
    o.threads = 1;
    server = std::make_unique<Server>(model, o);
    auto st = server->start();
    EXPECT_TRUE(st.ok()) << st.message();
  }
  httplib::Client client(int timeout_s = 30) const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(timeout_s, 0);
    return c;
  }
  std::pair<int, json> post(const std::string& path, const json& body) const {
    auto r = client().Post(path.c_str(), body.dump(), "application/json");
    if (!r) return {0, {}};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  int status(const char* method, const std::string& path, int timeout_s = 30) const {
    auto c = client(timeout_s);
    auto r = std::string(method) == "GET" ? c.Get(path.c_str()) : c.Delete(path.c_str());
    return r ? r->status : 0;
  }
  std::string upload(const json& chunk) const {
    auto [st, up] = post("/v1/chunks", chunk);
    EXPECT_EQ(st, 201) << up.dump();
    return st == 201 ? up["id"].get<std::string>() : std::string(32, '0');
  }
};

std::string fresh_dir(const std::string& name) {
  const std::string d = unique_temp("kamera-srvstore-") + name;
  std::filesystem::remove_all(d);
  return d;
}

}  // namespace

// Finding 2: a directory named like a canonical entry answered 500 and a completion on it ended
// in std::terminate; a FIFO blocked the lookup forever, holding the store's lock; a sparse file
// was read whole (RSS +880 MB for 2 GiB). Now each is a miss (404) within seconds, the server
// keeps serving, and the three are counted as discarded.
TEST(ServerStore, FilesThatAreNotEntriesAreMisses) {
  const std::string dir = fresh_dir("files");
  ServerOptions o;
  o.store_dir = dir;
  std::vector<std::string> ids;
  {
    Served s(o);
    for (int i = 0; i < 3; ++i) ids.push_back(s.upload({{"tokens", {5 + i, 6, 7, 8}}}));
  }
  const auto file = [&](int i) { return dir + "/canonical/" + ids[i] + ".kce"; };
  for (int i = 0; i < 3; ++i) std::filesystem::remove(file(i));
  std::filesystem::create_directory(file(0));
  ASSERT_EQ(::mkfifo(file(1).c_str(), 0644), 0);
  std::ofstream(file(2)).close();
  std::filesystem::resize_file(file(2), size_t(512) << 20);
  Served s(o);
  rawhttp::reset_peak_rss();
  const int64_t rss0 = rawhttp::proc_kb("VmRSS");
  EXPECT_EQ(s.status("GET", "/v1/chunks/" + ids[2]), 404);
  const int64_t grown_mb = (rawhttp::proc_kb("VmHWM") - rss0) / 1024;
  if (rawhttp::kRssMeaningful) {
    EXPECT_LT(grown_mb, 64) << "the sparse entry was read";
  }
  EXPECT_EQ(s.status("GET", "/v1/chunks/" + ids[0]), 404);
  auto [st, body] =
      s.post("/v1/completions",
             {{"prompt", {{{"type", "chunk"}, {"id", ids[0]}}, " x"}}, {"max_tokens", 1}});
  EXPECT_EQ(st, 404) << body.dump();
  EXPECT_EQ(s.status("GET", "/v1/chunks/" + ids[1], 5), 404) << "the FIFO lookup blocked";
  const int fd = ::open(file(1).c_str(), O_WRONLY | O_NONBLOCK);  // frees a blocked reader
  if (fd >= 0) ::close(fd);
  EXPECT_EQ(s.post("/v1/chunks", {{"tokens", {40, 41, 42}}}).first, 201);
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("kamera_tier_discarded_total{tier=\"disk\"} 3"), std::string::npos);
  std::filesystem::remove_all(dir);
}
