// Qwen3-ASR audio in /v1/chat/completions on the committed tiny pair (tests/data/qwen3a: the
// audio-only mmproj of projector type qwen3a as llama.cpp's converter writes it, beside a qwen3vl
// thinker). An input_audio part (WAV) becomes one chunk of the clip's 117 rows between
// <|audio_start|> and <|audio_end|>; it is encoded once; sent again it is an exact prefix, moved
// it is relocated from the context it was seen in, and the greedy tokens of an exact hit equal a
// re-prefill's. Pictures to the audio tower and the tower beside another decoder are refused by
// name.
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

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen3a/";

json audio_part(const std::string& data) {
  return {{"type", "input_audio"}, {"input_audio", {{"data", data}, {"format", "wav"}}}};
}

ServerOptions options() {
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = kDir + "mmproj.gguf";
  return o;
}

}  // namespace

TEST(ServerQwen3Audio, ClipEncodedOnceExactAndRelocated) {
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model);
  Server server(std::shared_ptr<const Model>(std::move(model)), options());
  ASSERT_TRUE(server.start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  const json part = audio_part(base64(file_bytes(kDir + "clip_16k.wav")));
  picture_chat::expect_media_reuse(client, part, 117);
  auto r = client.Post("/v1/chat/completions",
                       picture_chat::chat_body({part, {{"type", "text"}, {"text", "?"}}}).dump(),
                       "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["usage"]["images"]["audio_clips"], 1);
  EXPECT_EQ(j["usage"]["images"]["image_tokens"], 117) << j.dump();
  // a picture to the audio tower: refused by name
  r = client.Post(
      "/v1/chat/completions",
      picture_chat::chat_body(
          {picture_chat::image_part("data:image/png;base64," +
                                    base64(file_bytes(std::string(KAMERA_SOURCE_DIR) +
                                                      "/tests/data/internvl/img_32.png"))),
           {{"type", "text"}, {"text", "?"}}})
          .dump(),
      "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("this qwen3a file holds an audio tower and no vision tower"),
            std::string::npos)
      << r->body;
}

TEST(ServerQwen3Audio, TheTowerNeedsItsThinker) {
  // Qwen2.5-Omni's qwen2vl thinker beside the Qwen3 tower: refused at start, by name
  Server wrong(std::shared_ptr<const Model>(
                   tiny::load(std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen25o/decoder.gguf")),
               options());
  const Status s = wrong.start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs a qwen3vl or qwen3vlmoe decoder"), std::string::npos)
      << s.message();
}
