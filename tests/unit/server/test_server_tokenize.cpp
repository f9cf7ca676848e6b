// /tokenize and /detokenize: the server's ids are the tokenizer's, a round trip gives the text
// back, and every bad input is a JSON 400 with a stable code.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/server.h"
#include "support/tiny_models.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

struct Served {
  std::shared_ptr<const Model> model = tiny::load(tiny::model_path("qwen2"));
  std::unique_ptr<Server> server;
  explicit Served(ServerOptions o = {}) {
    o.port = 0;
    o.threads = 1;
    server = std::make_unique<Server>(model, o);
    auto st = server->start();
    EXPECT_TRUE(st.ok()) << st.message();
  }
  std::pair<int, json> post(const std::string& path, const json& body) const {
    httplib::Client c("127.0.0.1", server->port());
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    if (!r) return {0, {}};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
};

std::string code_of(const json& j) {
  return j.is_object() && j.contains("error") ? j["error"].value("code", "") : "";
}

}  // namespace

TEST(ServerTokenize, IdsAreTheTokenizersAndRoundTrip) {
  Served s;
  ASSERT_TRUE(s.model->tokenizer) << "the tiny model has no tokenizer";
  const Tokenizer& tok = *s.model->tokenizer;
  const std::string text = "Once upon a time, Tom and Lily played.";
  auto [st, r] = s.post("/tokenize", {{"content", text}});
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(r["tokens"].get<std::vector<int32_t>>(), tok.encode(text, false));
  EXPECT_GT(r["tokens"].size(), 3u);
  auto [st_b, rb] = s.post("/tokenize", {{"content", text}, {"add_special", true}});
  ASSERT_EQ(st_b, 200) << rb.dump();
  EXPECT_EQ(rb["tokens"].get<std::vector<int32_t>>(), tok.encode(text, tok.bos() >= 0));
  auto [st2, d] = s.post("/detokenize", {{"tokens", r["tokens"]}});
  ASSERT_EQ(st2, 200) << d.dump();
  EXPECT_EQ(d["content"].get<std::string>(),
            tok.decode_all(r["tokens"].get<std::vector<int32_t>>()));
  EXPECT_NE(d["content"].get<std::string>().find("Tom and Lily"), std::string::npos) << d.dump();
}

TEST(ServerTokenize, BadInputGets400) {
  ServerOptions o;
  o.max_chunk_tokens = 16;
  Served s(o);
  const int64_t vocab = s.model->cfg.n_vocab;
  const std::vector<std::pair<const char*, json>> cases = {
      {"/tokenize", json::object()},
      {"/tokenize", {{"content", 5}}},
      {"/tokenize", {{"content", "hi"}, {"add_special", "yes"}}},
      {"/tokenize", {{"content", std::string(100000, 'a')}}},
      {"/detokenize", json::object()},
      {"/detokenize", {{"tokens", {-1}}}},
      {"/detokenize", {{"tokens", {vocab}}}},
      {"/detokenize", {{"tokens", {1.5}}}},
      {"/detokenize", {{"tokens", {18446744073709551615ull}}}},
      {"/detokenize", {{"tokens", std::vector<int>(17, 5)}}},
  };
  for (const auto& [path, body] : cases) {
    auto [st, r] = s.post(path, body);
    EXPECT_EQ(st, 400) << path << " " << body.dump().substr(0, 80);
    EXPECT_EQ(code_of(r), "invalid_argument") << r.dump();
  }
  httplib::Client c("127.0.0.1", s.server->port());
  auto r = c.Get("/tokenize");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
}

TEST(ServerTokenize, NeedsTheApiKey) {
  ServerOptions o;
  o.api_key = "tokenize-key-0123456789";
  Served s(o);
  auto [st, r] = s.post("/tokenize", {{"content", "hi"}});
  EXPECT_EQ(st, 401) << r.dump();
  httplib::Client c("127.0.0.1", s.server->port());
  c.set_default_headers({{"Authorization", "Bearer " + o.api_key}});
  auto ok = c.Post("/detokenize", json{{"tokens", {5, 6}}}.dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}
