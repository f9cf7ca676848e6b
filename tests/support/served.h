// A server on a tiny synthetic qwen2, on a free loopback port, for the server's HTTP tests, with
// small helpers: a client (optionally with an API key), JSON POSTs and GETs, one metric.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "server/server.h"
#include "support/sanitizer.h"
#include "support/tiny_models.h"

namespace tiny {

struct Served {
  std::shared_ptr<const kamera::Model> model;
  std::unique_ptr<kamera::Server> server;
  explicit Served(kamera::ServerOptions o = {}) {
    model = load(model_path("qwen2"));
    o.port = 0;
    o.threads = 1;
    server = std::make_unique<kamera::Server>(model, o);
    auto st = server->start();
    EXPECT_TRUE(st.ok()) << st.message();
  }
  int port() const { return server->port(); }
  httplib::Client client(const std::string& key = "") const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(static_cast<time_t>(30 * test_sanitizer::kTimeScale),
                       0);  // a burst waits behind 80 others (longer under ASan)
    if (!key.empty()) c.set_default_headers({{"Authorization", "Bearer " + key}});
    return c;
  }
  // POST with JSON (GET when method says so); the status and the parsed body.
  std::pair<int, nlohmann::json> call(const std::string& method, const std::string& path,
                                      const nlohmann::json& body = nullptr,
                                      const std::string& key = "") const {
    auto c = client(key);
    auto r = method == "GET"
                 ? c.Get(path.c_str())
                 : c.Post(path.c_str(), body.is_null() ? "" : body.dump(), "application/json");
    if (!r) return {0, {}};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }
  std::pair<int, nlohmann::json> post(const std::string& path, const nlohmann::json& body,
                                      const std::string& key = "") const {
    return call("POST", path, body, key);
  }
  // The value of an unlabelled metric of /metrics (-1 when absent).
  double metric(const std::string& name) const {
    auto r = client().Get("/metrics");
    if (!r) return -1;
    const size_t at = r->body.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(r->body.substr(at + name.size() + 2));
  }
  bool healthy() const { return call("GET", "/health").first == 200; }
};

}  // namespace tiny
