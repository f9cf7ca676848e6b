// Qwen2.5-Omni audio in /v1/chat/completions on the committed tiny pair (tests/data/qwen25o: the
// mmproj with both halves as llama.cpp's converter writes it, beside a qwen2vl thinker). An
// input_audio part (WAV) becomes one chunk of the clip's rows between <|audio_bos|> and
// <|audio_eos|>; it is encoded once; sent again it is an exact prefix, moved it is relocated from
// the context it was seen in, and the greedy tokens of an exact hit equal a re-prefill's. Other
// formats, a broken WAV, pictures to the audio tower and audio to a server without it are refused
// by name.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/server.h"
#include "support/base64.h"
#include "support/picture_chat.h"
#include "support/tiny_models.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen25o/";

json audio_part(const std::string& data, const std::string& format = "wav") {
  return {{"type", "input_audio"}, {"input_audio", {{"data", data}, {"format", format}}}};
}

std::unique_ptr<Server> omni_server(const std::string& mmproj) {
  auto model = tiny::load(kDir + "decoder.gguf");
  EXPECT_TRUE(model);
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = mmproj;
  auto s = std::make_unique<Server>(std::shared_ptr<const Model>(std::move(model)), o);
  EXPECT_TRUE(s->start().ok());
  return s;
}

json post(httplib::Client& c, const json& body, int* status) {
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  *status = r ? r->status : 0;
  return r ? json::parse(r->body, nullptr, false) : json();
}

}  // namespace

TEST(ServerAudio, ClipEncodedOnceExactAndRelocated) {
  auto server = omni_server(kDir + "mmproj.gguf");
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(120, 0);
  const json part = audio_part(base64(file_bytes(kDir + "clip_16k.wav")));
  picture_chat::expect_media_reuse(client, part, 750);
  int st = 0;
  auto r = post(client, picture_chat::chat_body({part, {{"type", "text"}, {"text", "?"}}}), &st);
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(r["usage"]["images"]["audio_clips"], 1);
  EXPECT_EQ(r["usage"]["images"]["count"], 0);
}

TEST(ServerAudio, RefusalsNameTheProblem) {
  auto server = omni_server(kDir + "mmproj.gguf");
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(60, 0);
  const std::string wav = file_bytes(kDir + "clip_16k.wav");
  struct Case {
    json part;
    int status;
    const char* code;
    const char* says;
  };
  std::string broken = wav;
  broken.resize(broken.size() / 2);  // the data chunk cut short
  std::string eight_bit = wav;
  eight_bit[34] = 8;  // bits per sample
  const std::vector<Case> cases = {
      {audio_part(base64(wav), "mp3"), 415, "unsupported_media_type", "format 'mp3'"},
      {audio_part(base64(broken)), 400, "invalid_audio", "truncated"},
      {audio_part(base64(eight_bit)), 415, "unsupported_media_type", "8-bit"},
      {audio_part("not base64!"), 400, "invalid_base64", "audio"},
      {{{"type", "input_audio"}, {"input_audio", "x"}}, 400, "invalid_media_part", "input_audio"},
      {picture_chat::image_part(
           "data:image/png;base64," +
           base64(file_bytes(std::string(KAMERA_SOURCE_DIR) + "/tests/data/internvl/img_32.png"))),
       400, "invalid_image", "vision tower is not loaded"},
  };
  for (const Case& c : cases) {
    int st = 0;
    auto r =
        post(client, picture_chat::chat_body({c.part, {{"type", "text"}, {"text", "?"}}}), &st);
    EXPECT_EQ(st, c.status) << r.dump();
    EXPECT_EQ(r["error"]["code"], c.code) << r.dump();
    EXPECT_NE(r.dump().find(c.says), std::string::npos) << r.dump();
    EXPECT_EQ(r["error"]["param"], "messages[0].content[0]") << r.dump();
  }
}

// The Responses API's input_audio part (chat's shape) takes the chat path: the same prompt, the
// clip served from the cache chat's request encoded, the same greedy answer; its refusals name
// the part by its Responses path.
TEST(ServerAudio, ResponsesInputAudioIsChatsClip) {
  auto server = omni_server(kDir + "mmproj.gguf");
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(120, 0);
  const std::string data = base64(file_bytes(kDir + "clip_16k.wav"));
  json chat = picture_chat::chat_body({audio_part(data), {{"type", "text"}, {"text", "?"}}});
  chat["max_tokens"] = 4;
  chat["temperature"] = 0;
  int st = 0;
  const json c = post(client, chat, &st);
  ASSERT_EQ(st, 200) << c.dump();
  auto responses = [&](const std::string& format, int* status) {
    const json body = {
        {"max_output_tokens", 4},
        {"temperature", 0},
        {"input",
         {{{"role", "user"},
           {"content", {audio_part(data, format), {{"type", "input_text"}, {"text", "?"}}}}}}}};
    auto r = client.Post("/v1/responses", body.dump(), "application/json");
    EXPECT_TRUE(r);
    *status = r ? r->status : 0;
    return r ? json::parse(r->body, nullptr, false) : json();
  };
  const json r = responses("wav", &st);
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(r["usage"]["input_tokens"], c["usage"]["prompt_tokens"]) << r.dump();
  EXPECT_GT(r["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), 0) << r.dump();
  std::string text;
  for (const json& item : r["output"])
    if (item["type"] == "message")
      for (const json& part : item["content"]) text += part.value("text", "");
  EXPECT_EQ(text, c["choices"][0]["message"]["content"].get<std::string>()) << r.dump();
  const json bad = responses("mp3", &st);
  EXPECT_EQ(st, 415) << bad.dump();
  EXPECT_EQ(bad["error"]["code"], "unsupported_media_type") << bad.dump();
  EXPECT_EQ(bad["error"]["param"], "input[0].content[0]") << bad.dump();
}

TEST(ServerAudio, AudioNeedsTheAudioTower) {
  // a picture tower (InternVL beside its qwen2 decoder) takes no input_audio part
  auto model = tiny::load(std::string(KAMERA_SOURCE_DIR) + "/tests/data/internvl/decoder.gguf");
  ASSERT_TRUE(model);
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = std::string(KAMERA_SOURCE_DIR) + "/tests/data/internvl/mmproj.gguf";
  Server server(std::shared_ptr<const Model>(std::move(model)), o);
  ASSERT_TRUE(server.start().ok());
  httplib::Client client("127.0.0.1", server.port());
  int st = 0;
  const json part = audio_part(base64(file_bytes(kDir + "clip_16k.wav")));
  auto r = post(client, picture_chat::chat_body(json::array({part})), &st);
  EXPECT_EQ(st, 400) << r.dump();
  EXPECT_EQ(r["error"]["code"], "invalid_media_part") << r.dump();
  EXPECT_NE(r.dump().find("reads no audio"), std::string::npos) << r.dump();
  // and the audio tower needs the thinker: another decoder is refused at start
  ServerOptions o2 = o;
  o2.mmproj = kDir + "mmproj.gguf";
  Server wrong(std::shared_ptr<const Model>(tiny::load(std::string(KAMERA_SOURCE_DIR) +
                                                       "/tests/data/internvl/decoder.gguf")),
               o2);
  const Status s = wrong.start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs a qwen2vl decoder"), std::string::npos) << s.message();
}
