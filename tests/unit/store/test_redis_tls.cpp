// The Redis tier over TLS (rediss://): a redis-server started here with --tls-port and a
// certificate made here by openssl. Entries go through and come back bit-identical; a server
// whose certificate does not chain to the CA, or whose name does not match, is never used.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "store/redis_tier.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

const std::string kKey = "the server's store key, 32 bytes";

bool have(const char* tool) {
  return std::system(fmt::format("command -v {} >/dev/null 2>&1", tool).c_str()) == 0;
}

// A TLS-only redis-server on a free-ish port, with a self-signed certificate for `san`.
class TlsRedis {
 public:
  explicit TlsRedis(const std::string& san) {
    dir_ = unique_temp("kamera-rediss-") + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    port_ = 20000 + ::getpid() % 20000;
    const std::string mk = fmt::format(
        "cd {0} && openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem "
        "-days 2 -subj /CN=kamera-test -addext subjectAltName={1} >/dev/null 2>&1 && "
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout other-key.pem -out other.pem -days 2 "
        "-subj /CN=kamera-test -addext subjectAltName={1} >/dev/null 2>&1 && "
        "redis-server --port 0 --tls-port {2} --bind 127.0.0.1 --tls-cert-file cert.pem "
        "--tls-key-file key.pem --tls-ca-cert-file cert.pem --tls-auth-clients no --save '' "
        "--appendonly no --daemonize yes --pidfile {0}/redis.pid --logfile {0}/redis.log",
        dir_, san, port_);
    started_ = std::system(mk.c_str()) == 0;
  }
  ~TlsRedis() {
    std::ifstream pid(dir_ + "/redis.pid");
    int p = 0;
    if (pid >> p && p > 0) ::kill(p, SIGTERM);
    std::filesystem::remove_all(dir_);
  }
  bool started() const { return started_; }
  int port() const { return port_; }
  std::string ca() const { return dir_ + "/cert.pem"; }
  std::string other_ca() const { return dir_ + "/other.pem"; }
  // Waits until the server completes a handshake (it starts in the background).
  bool ready() const {
    for (int i = 0; i < 50; ++i) {
      if (TlsTunnel::open("localhost", port_, TlsOptions{ca(), "", ""}, 500).ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

 private:
  std::string dir_;
  int port_ = 0;
  bool started_ = false;
};

std::shared_ptr<RedisTier> tier(const std::string& url, const Model& m, const std::string& ca) {
  RedisTier::Options o;
  o.key = kKey;
  o.timeout_ms = 2000;
  o.tls.ca_file = ca;
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

}  // namespace

TEST(RedisTls, EntriesGoThroughAVerifiedTlsSession) {
  if (!have("redis-server") || !have("openssl")) GTEST_SKIP() << "needs redis-server and openssl";
  TlsRedis redis("DNS:localhost");
  if (!redis.started() || !redis.ready())
    GTEST_SKIP() << "this redis-server does not start with --tls-port (built without TLS?)";
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto e = ctx->cache().canonical(ChunkContent::from_tokens({5, 9, 2, 6, ::getpid() % 400 + 20}));
  ASSERT_TRUE(e.ok());
  const std::string url = fmt::format("rediss://localhost:{}/3", redis.port());

  auto writer = tier(url, m, redis.ca());
  ASSERT_TRUE(writer && writer->connected());
  writer->save_canonical(**e);
  auto reader = tier(url, m, redis.ca());  // another server sharing the Redis
  ASSERT_TRUE(reader);
  auto back = reader->load_canonical((*e)->id);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->content.tokens, (*e)->content.tokens);
  EXPECT_TRUE(same_kv(back->kv, (*e)->kv));
  EXPECT_EQ(writer->stats().errors + reader->stats().errors, 0);
  EXPECT_EQ(reader->stats().hits, 1);

  // Large values cross the tunnel in both directions (many TLS records, partial writes).
  for (int i = 0; i < 3; ++i) writer->save_canonical(**e);
  EXPECT_NE(reader->load_canonical((*e)->id), nullptr);
  EXPECT_EQ(writer->stats().errors + reader->stats().errors, 0);
}

TEST(RedisTls, AnUnverifiedServerIsNeverUsed) {
  if (!have("redis-server") || !have("openssl")) GTEST_SKIP() << "needs redis-server and openssl";
  TlsRedis redis("DNS:localhost");
  if (!redis.started() || !redis.ready())
    GTEST_SKIP() << "this redis-server does not start with --tls-port (built without TLS?)";
  // Signed by another CA: the handshake is refused and says why.
  auto wrong_ca =
      TlsTunnel::open("localhost", redis.port(), TlsOptions{redis.other_ca(), "", ""}, 2000);
  ASSERT_FALSE(wrong_ca.ok());
  EXPECT_NE(wrong_ca.message().find("certificate"), std::string::npos) << wrong_ca.message();
  // The certificate names localhost only: 127.0.0.1 does not match it.
  auto wrong_name =
      TlsTunnel::open("127.0.0.1", redis.port(), TlsOptions{redis.ca(), "", ""}, 2000);
  ASSERT_FALSE(wrong_name.ok());
  EXPECT_NE(wrong_name.message().find("certificate"), std::string::npos) << wrong_name.message();

  // Through the tier: an outage (counted), never a connection, and the server keeps going.
  auto ctx = tiny::context(tiny::model_path("qwen2"), 400, 16, size_t(1) << 28, 1);
  ASSERT_TRUE(ctx);
  auto t =
      tier(fmt::format("rediss://localhost:{}/3", redis.port()), ctx->model(), redis.other_ca());
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->connected());
  EXPECT_GE(t->stats().errors, 1);
  // A missing CA file is a configuration error at open, not a silent outage.
  RedisTier::Options o;
  o.key = kKey;
  o.tls.ca_file = "/nonexistent/ca.pem";
  auto bad = RedisTier::open(fmt::format("rediss://localhost:{}", redis.port()),
                             ctx->model().fingerprint, ctx->model().kv_layout(), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(bad.message().find("/nonexistent/ca.pem"), std::string::npos) << bad.message();
}
