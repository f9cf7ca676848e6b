// A kamera server on a synthetic model for the server tests: started on a free port with one
// engine thread, a client, and JSON helpers.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/server.h"
#include "support/tiny_models.h"

namespace tiny {

struct TestServer {
  std::shared_ptr<const kamera::Model> model;
  std::unique_ptr<kamera::Server> server;
  std::unique_ptr<httplib::Client> client;

  explicit TestServer(kamera::ServerOptions o = {},
                      const std::string& path = tiny::model_path("qwen2")) {
    model = tiny::load(path);
    o.port = 0;
    o.threads = 1;
    server = std::make_unique<kamera::Server>(model, o);
    auto st = server->start();
    EXPECT_TRUE(st.ok()) << st.message();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    client->set_read_timeout(60, 0);
  }
  nlohmann::json post(const std::string& path, const nlohmann::json& body, int* status = nullptr) {
    auto r = client->Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return {};
    if (status) *status = r->status;
    return nlohmann::json::parse(r->body, nullptr, false);
  }
  // The data chunks of an SSE stream (a POST of `body` with "stream": true), [DONE] left out.
  std::vector<nlohmann::json> stream(const std::string& path, nlohmann::json body) {
    body["stream"] = true;
    auto r = client->Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    std::vector<nlohmann::json> out;
    for (size_t at = 0; r && (at = r->body.find("data: ", at)) != std::string::npos;) {
      const size_t end = r->body.find("\n\n", at);
      const std::string payload = r->body.substr(at + 6, end - at - 6);
      at = end;
      if (payload != "[DONE]") out.push_back(nlohmann::json::parse(payload));
    }
    return out;
  }
  nlohmann::json get(const std::string& path, int* status = nullptr) {
    auto r = client->Get(path.c_str());
    EXPECT_TRUE(r);
    if (!r) return {};
    if (status) *status = r->status;
    return nlohmann::json::parse(r->body, nullptr, false);
  }
};

}  // namespace tiny
