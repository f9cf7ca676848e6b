// `kamera route` in front of a backend of the test's own (an HTTP server that records each
// request's headers): Anthropic's clients authenticate with x-api-key and send anthropic-version
// (and anthropic-beta); the router accepts x-api-key as its own key and passes the three on, as it
// passes Authorization, so /v1/messages works through it; with --backend-key it sends its own
// Authorization and not the client's x-api-key.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "route/router.h"
#include "support/tiny_models.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

// Answers /health, and every POST with a small Messages answer; keeps the POSTs' headers.
struct RecordingBackend {
  httplib::Server http;
  std::thread thread;
  int port = 0;
  std::mutex mu;
  httplib::Headers seen;

  RecordingBackend() {
    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lock(mu);
        seen = req.headers;
      }
      res.set_content(R"({"type":"message","content":[]})", "application/json");
    });
    port = http.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { http.listen_after_bind(); });
    while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~RecordingBackend() {
    http.stop();
    thread.join();
  }
  std::string header(const std::string& name) {
    std::lock_guard lock(mu);
    auto it = seen.find(name);
    return it == seen.end() ? "" : it->second;
  }
};

struct Routed {
  std::unique_ptr<Router> router;
  Routed(int backend, std::vector<std::string> keys, std::string backend_key = "") {
    RouterOptions o;
    o.backends = {fmt::format("http://127.0.0.1:{}", backend)};
    o.api_keys = std::move(keys);
    o.backend_key = std::move(backend_key);
    o.health_ms = 100;
    auto r = Router::create(tiny::load(tiny::model_path("qwen2")), o);
    EXPECT_TRUE(r.ok()) << r.message();
    router = std::move(*r);
    EXPECT_TRUE(router->start().ok());
  }
  int post(const httplib::Headers& h) {
    httplib::Client c("127.0.0.1", router->port());
    const json body = {
        {"model", "m"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
    auto r = c.Post("/v1/messages", h, body.dump(), "application/json");
    return r ? r->status : 0;
  }
};

const httplib::Headers kAnthropic = {{"x-api-key", "client-key"},
                                     {"anthropic-version", "2023-06-01"},
                                     {"anthropic-beta", "prompt-caching-2024-07-31"}};

}  // namespace

TEST(RouteHeaders, AnthropicsHeadersReachTheBackend) {
  RecordingBackend backend;
  Routed open(backend.port, {});
  ASSERT_EQ(open.post(kAnthropic), 200);
  EXPECT_EQ(backend.header("x-api-key"), "client-key");
  EXPECT_EQ(backend.header("anthropic-version"), "2023-06-01");
  EXPECT_EQ(backend.header("anthropic-beta"), "prompt-caching-2024-07-31");
  EXPECT_EQ(backend.header("Authorization"), "");

  // the router's own keys: x-api-key is one of the two ways to send them
  Routed keyed(backend.port, {"client-key"});
  EXPECT_EQ(keyed.post(kAnthropic), 200);
  EXPECT_EQ(keyed.post({{"x-api-key", "wrong"}, {"anthropic-version", "2023-06-01"}}), 401);
  EXPECT_EQ(keyed.post({{"anthropic-version", "2023-06-01"}}), 401);

  // with a backend key the router speaks for the client: its own Authorization, not x-api-key
  Routed proxy(backend.port, {"client-key"}, "backend-key");
  ASSERT_EQ(proxy.post(kAnthropic), 200);
  EXPECT_EQ(backend.header("Authorization"), "Bearer backend-key");
  EXPECT_EQ(backend.header("x-api-key"), "");
  EXPECT_EQ(backend.header("anthropic-version"), "2023-06-01");
}
