// Image parts in /v1/completions prompts (server/completions.cpp): a prompt given as an array of
// parts takes image_url and video parts as a chat message does, under the same limits and codes;
// the image goes between the vision delimiters as a chunk, encoded once; a window completion
// refuses them.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "server/server.h"
#include "support/base64.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "vision/qwen_vision.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

json image_part() {
  std::ifstream f(std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_preprocess/rgb_61x47.png",
                  std::ios::binary);
  const std::string url =
      "data:image/png;base64," + base64(std::string(std::istreambuf_iterator<char>(f), {}));
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

json text_part(const std::string& t) {
  return {{"type", "text"}, {"text", t}};
}

TEST(ServerCompletionImages, PromptPartsTakeImages) {
  const std::string mm =
      unique_temp("kamera-completion-images-") + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(QwenVisionModel::random(*qwen_vision_preset("qwen2vl", "tiny"), 4)
                  .write_gguf(mm, DType::F32)
                  .ok());
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = mm;
  o.max_images = 2;
  Server s(tiny::load(tiny::model_path("qwen2vl")), o);
  ASSERT_TRUE(s.start().ok());
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  auto post = [&](const std::string& path, const json& body, int* status) {
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r);
    *status = r ? r->status : 0;
    return r ? json::parse(r->body, nullptr, false) : json();
  };
  const json prompt = {text_part("Look: "), image_part(), text_part("What is it?")};
  auto body = [&](const json& p) {
    return json{{"prompt", p}, {"max_tokens", 3}, {"temperature", 0}};
  };
  int st = 0;
  const json a = post("/v1/completions", body(prompt), &st);
  ASSERT_EQ(st, 200) << a.dump();
  EXPECT_EQ(a["usage"]["images"]["count"], 1);
  EXPECT_EQ(a["usage"]["images"]["encoded"], 1);
  EXPECT_EQ(a["usage"]["images"]["image_tokens"], 4);  // 61 x 47 -> 56 x 56 -> 2 x 2 merged
  const json b = post("/v1/completions", body(prompt), &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(b["usage"]["images"]["encoded"], 0);
  EXPECT_EQ(b["choices"][0]["text"], a["choices"][0]["text"]);
  // the image is a chunk segment of the prompt, between the delimiters' text runs
  const json& segs = a["usage"]["kamera"]["segments"];
  ASSERT_EQ(segs.size(), 2u);  // "Look: <|vision_start|>", the image (the query is the rest)
  EXPECT_EQ(segs[1]["tokens"], 4);

  // the same limits and codes as chat
  const json three = {image_part(), image_part(), image_part(), text_part("?")};
  const json e = post("/v1/completions", body(three), &st);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(e["error"]["code"], "too_many_images");
  const json remote = {
      {{"type", "image_url"}, {"image_url", {{"url", "https://example.com/a.png"}}}},
      text_part("?")};
  EXPECT_EQ(post("/v1/completions", body(remote), &st)["error"]["code"],
            "remote_media_unsupported");
  EXPECT_EQ(st, 400);
  // a plain string prompt is untouched
  EXPECT_EQ(post("/v1/completions", body("Hello"), &st)["usage"].contains("images"), false);
  EXPECT_EQ(st, 200);
  std::remove(mm.c_str());
}

TEST(ServerCompletionImages, NoTowerNoImages) {
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  Server s(tiny::load(tiny::model_path("qwen2vl")), o);
  ASSERT_TRUE(s.start().ok());
  httplib::Client c("127.0.0.1", s.port());
  const json body = {{"prompt", {image_part(), text_part("?")}}, {"max_tokens", 1}};
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "vision_not_enabled");
}

}  // namespace
