// SmolVLM2 in /v1/chat/completions on the committed tiny pair (tests/data/idefics3: a SmolVLM
// tower in llama.cpp's mmproj layout beside a SmolLM2-style llama decoder). A picture becomes one
// chunk holding its tiles, its global image and the tokens between them; it is encoded once; sent
// again it is an exact prefix, moved it is relocated from the context it was seen in, and the
// greedy tokens of an exact hit equal a re-prefill's. A video, or a decoder other than llama,
// is refused by name.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/server.h"
#include "support/base64.h"
#include "support/idefics3_fixture.h"
#include "support/tiny_models.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

json image_part(const std::string& url) {
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

json chat_body(json content) {
  return {{"messages", {{{"role", "user"}, {"content", std::move(content)}}}},
          {"max_tokens", 6},
          {"temperature", 0}};
}

const json& image_segment(const json& c) {
  static const json none;
  for (const json& s : c["usage"]["kamera"]["segments"])
    if (s.value("media", false)) return s;
  return none;
}

}  // namespace

TEST(ServerIdefics3, PictureEncodedOnceExactAndRelocated) {
  auto model = tiny::load(idefics3_fixture::kDir + "decoder.gguf");
  ASSERT_TRUE(model);
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = idefics3_fixture::kDir + "mmproj.gguf";
  Server server(std::shared_ptr<const Model>(std::move(model)), o);
  ASSERT_TRUE(server.start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  auto chat = [&](const json& body, int* status) {
    auto r = client.Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    *status = r ? r->status : 0;
    return r ? json::parse(r->body, nullptr, false) : json();
  };
  const std::string img =
      "data:image/png;base64," + base64(file_bytes(idefics3_fixture::kDir + "img_144x96.png"));
  int st = 0;
  const json a = chat_body({image_part(img), {{"type", "text"}, {"text", "What is in it?"}}});
  auto first = chat(a, &st);
  ASSERT_EQ(st, 200) << first.dump();
  EXPECT_EQ(first["usage"]["images"]["encoded"], 1);
  // 3 x 2 tiles and the global image of 16 rows each, 17 tokens around them
  EXPECT_EQ(first["usage"]["images"]["image_tokens"], 7 * 16 + 17);
  EXPECT_EQ(first["usage"]["completion_tokens"], 6);  // greedy tokens to compare below
  auto second = chat(a, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(second["usage"]["images"]["encoded"], 0);
  EXPECT_EQ(image_segment(second)["source"], "prefix");
  EXPECT_EQ(second["choices"][0]["message"]["content"], first["choices"][0]["message"]["content"]);
  const json b = chat_body({{{"type", "text"}, {"text", "Something else first, then "}},
                            image_part(img),
                            {{"type", "text"}, {"text", " what is it?"}}});
  auto moved = chat(b, &st);
  ASSERT_EQ(st, 200) << moved.dump();
  EXPECT_EQ(moved["usage"]["images"]["encoded"], 0);
  EXPECT_EQ(moved["usage"]["images"]["reused_chunks"], 1);
  EXPECT_EQ(image_segment(moved)["source"], "context-nearest");
  EXPECT_GT(image_segment(moved)["position"].get<int>(),
            image_segment(first)["position"].get<int>());
  json fresh_body = b;
  fresh_body["reuse"] = "reprefill";
  auto fresh = chat(fresh_body, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(image_segment(fresh)["source"], "reprefilled");
  auto again = chat(b, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(image_segment(again)["source"], "prefix");
  EXPECT_EQ(again["choices"][0]["message"]["content"], fresh["choices"][0]["message"]["content"]);
  // a video is refused by name
  const json v = {{"type", "video"}, {"frames", {img, img}}};
  auto vid = chat(chat_body({v, {{"type", "text"}, {"text", "?"}}}), &st);
  EXPECT_EQ(st, 400) << vid.dump();
  EXPECT_NE(vid.dump().find("single frames"), std::string::npos) << vid.dump();
}

TEST(ServerIdefics3, TowerNeedsALlamaDecoderOfItsWidth) {
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = idefics3_fixture::kDir + "mmproj.gguf";
  Server server(std::shared_ptr<const Model>(tiny::load(tiny::model_path("qwen2vl"))), o);
  const Status s = server.start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("llama"), std::string::npos) << s.message();
}
