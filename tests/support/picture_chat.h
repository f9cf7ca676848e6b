// A picture through /v1/chat/completions, as the one-picture towers' server tests send it
// (test_server_kimi.cpp, test_server_idefics3.cpp): the request parts, the reply's image
// segment, and the reuse path every tower's picture (and Qwen2.5-Omni's audio clip,
// test_server_audio.cpp) takes.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

namespace picture_chat {

using json = nlohmann::json;

inline json image_part(const std::string& url) {
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

inline json chat_body(json content) {
  return {{"messages", {{{"role", "user"}, {"content", std::move(content)}}}},
          {"max_tokens", 6},
          {"temperature", 0}};
}

// The reply's one image segment (usage.kamera.segments[i].media).
inline const json& image_segment(const json& c) {
  static const json none;
  for (const json& s : c["usage"]["kamera"]["segments"])
    if (s.value("media", false)) return s;
  return none;
}

// The media part `part` (image_tokens rows: a picture, an audio clip) is encoded once; sent again
// it is an exact prefix; after other text it is relocated from the context it was seen in; the
// greedy tokens of an exact hit equal a re-prefill's.
inline void expect_media_reuse(httplib::Client& client, const json& part, int image_tokens) {
  auto chat = [&](const json& body, int* status) {
    auto r = client.Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    *status = r ? r->status : 0;
    return r ? json::parse(r->body, nullptr, false) : json();
  };
  int st = 0;
  const json a = chat_body({part, {{"type", "text"}, {"text", "What is in it?"}}});
  auto first = chat(a, &st);
  ASSERT_EQ(st, 200) << first.dump();
  EXPECT_EQ(first["usage"]["images"]["encoded"], 1);
  EXPECT_EQ(first["usage"]["images"]["image_tokens"], image_tokens);
  EXPECT_EQ(first["usage"]["completion_tokens"], 6);  // greedy tokens to compare below
  auto second = chat(a, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(second["usage"]["images"]["encoded"], 0);
  EXPECT_EQ(second["usage"]["images"]["cached_embeddings"], 1);
  EXPECT_EQ(image_segment(second)["source"], "prefix");
  EXPECT_EQ(second["choices"][0]["message"]["content"], first["choices"][0]["message"]["content"]);
  const json b = chat_body({{{"type", "text"}, {"text", "Something else first, then "}},
                            part,
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
}

// expect_media_reuse on the picture at `url`; a video of it is refused by name.
inline void expect_picture_reuse(httplib::Client& client, const std::string& url,
                                 int image_tokens) {
  expect_media_reuse(client, image_part(url), image_tokens);
  int st = 0;
  auto chat = [&](const json& body, int* status) {
    auto r = client.Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    *status = r ? r->status : 0;
    return r ? json::parse(r->body, nullptr, false) : json();
  };
  const json v = {{"type", "video"}, {"frames", {url, url}}};
  auto vid = chat(chat_body({v, {{"type", "text"}, {"text", "?"}}}), &st);
  EXPECT_EQ(st, 400) << vid.dump();
  EXPECT_NE(vid.dump().find("single frames"), std::string::npos) << vid.dump();
}

}  // namespace picture_chat
