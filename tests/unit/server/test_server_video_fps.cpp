// The "fps" field of a video part in /v1/chat/completions (server/media_parts.h): with a
// Qwen2.5-VL tower the frames' rate scales the video's t (vision/video_time.h), so the same frames
// at another rate are another chunk (another id: other positions), made from the same embeddings
// (the tower runs once); a Qwen2-VL tower ignores the rate (t = pair index: the same chunk). A
// bad fps, or one on an image part, is a 400 invalid_media_part.
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

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_preprocess/";

std::string url_of(const std::string& name) {
  std::ifstream f(kDir + name, std::ios::binary);
  const std::string mime = name.ends_with(".png") ? "image/png" : "image/jpeg";
  return "data:" + mime + ";base64," + base64(std::string(std::istreambuf_iterator<char>(f), {}));
}

std::string tower(const std::string& arch) {
  const std::string p =
      unique_temp("kamera-video-fps-") + arch + "-" + std::to_string(::getpid()) + ".gguf";
  EXPECT_TRUE(
      QwenVisionModel::random(*qwen_vision_preset(arch, "tiny"), 3).write_gguf(p, DType::F32).ok());
  return p;
}

struct FpsServer {
  std::unique_ptr<Server> server;
  std::unique_ptr<httplib::Client> client;
  explicit FpsServer(const std::string& mmproj) {
    ServerOptions o;
    o.port = 0;
    o.threads = 1;
    o.mmproj = mmproj;
    server = std::make_unique<Server>(tiny::load(tiny::model_path("qwen2vl")), o);
    EXPECT_TRUE(server->start().ok());
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    client->set_read_timeout(60, 0);
  }
  // A video of 4 frames (2 temporal pairs) at `fps` (absent when fps is null); the status, the
  // usage's images object and the video segment's id.
  std::tuple<int, json, std::string> ask(const json& fps, bool on_image = false) {
    json part = {{"type", "video"},
                 {"frames",
                  {url_of("rgb_61x47.png"), url_of("color_70x50.jpg"), url_of("rgb_61x47.png"),
                   url_of("color_70x50.jpg")}}};
    if (on_image) part = {{"type", "image_url"}, {"image_url", {{"url", url_of("rgb_61x47.png")}}}};
    if (!fps.is_null()) part["fps"] = fps;
    const json body = {
        {"messages",
         {{{"role", "user"}, {"content", {part, {{"type", "text"}, {"text", "And then?"}}}}}}},
        {"max_tokens", 2},
        {"temperature", 0}};
    auto r = client->Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return {0, json(), ""};
    const json j = json::parse(r->body, nullptr, false);
    if (r->status != 200) return {r->status, j, ""};
    for (const json& s : j["usage"]["kamera"]["segments"])  // the video's, wherever it came from
      if (s.value("media", false)) return {r->status, j["usage"]["images"], s["id"]};
    return {r->status, j["usage"]["images"], "(no media segment)"};
  }
};

TEST(ServerVideoFps, Qwen25RateMovesTheVideoQwen2DoesNot) {
  const std::string t25 = tower("qwen25vl"), t2 = tower("qwen2vl");
  {
    FpsServer s(t25);
    auto [st2, u2, id2] = s.ask(2.0);
    ASSERT_EQ(st2, 200) << u2.dump();
    EXPECT_EQ(u2["encoded"], 1);
    auto [st1, u1, id1] = s.ask(1);
    ASSERT_EQ(st1, 200) << u1.dump();
    EXPECT_EQ(u1["encoded"], 0);  // the embeddings of the first request, retimed
    EXPECT_NE(id1, id2);          // t = 0, 4 instead of 0, 2: another chunk
    auto [std_, ud, idd] = s.ask(json());
    ASSERT_EQ(std_, 200);
    EXPECT_EQ(idd, id2);  // the default rate is 2 fps
  }
  {
    FpsServer s(t2);
    auto [st2, u2, id2] = s.ask(2.0);
    ASSERT_EQ(st2, 200) << u2.dump();
    auto [st1, u1, id1] = s.ask(0.5);
    ASSERT_EQ(st1, 200) << u1.dump();
    EXPECT_EQ(id1, id2);  // Qwen2-VL: t is the pair index whatever the rate
    for (const json& bad : {json(0), json(-2), json("2"), json(1e9)}) {
      auto [st, err, id] = s.ask(bad);
      EXPECT_EQ(st, 400) << bad.dump();
      EXPECT_EQ(err["error"]["code"], "invalid_media_part") << bad.dump();
    }
    auto [st, err, id] = s.ask(2.0, true);
    EXPECT_EQ(st, 400);
    EXPECT_EQ(err["error"]["code"], "invalid_media_part");
  }
  std::remove(t25.c_str());
  std::remove(t2.c_str());
}

}  // namespace
