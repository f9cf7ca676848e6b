// An Omni file's pictures and audio clips in one conversation through /v1/chat/completions, on
// each committed tiny pair (the mmproj with both halves as llama.cpp's converter writes it):
// Qwen2.5-Omni's (tests/data/qwen25o, beside a qwen2vl thinker) and Qwen3-Omni's
// (tests/data/qwen3omni, beside a qwen3vlmoe thinker). One --mmproj serves an image_url part
// through the file's vision half and an input_audio part through its audio half; in one message
// each is encoded once, sent again each is an exact prefix, moved (the other way round, after
// other text) each is relocated from the context it was seen in, and the greedy tokens of an
// exact hit equal a re-prefill's; Qwen2.5-Omni's video part's frames are one chunk of the vision
// half, timed as Omni times them (Qwen3-Omni's video: refused by name).
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

const std::string kData = std::string(KAMERA_SOURCE_DIR) + "/tests/data/";

// One Omni family's pair: its picture (not resized), the picture's rows and the positions it
// advances, the 2-s clip's rows.
struct OmniServed {
  const char* name;
  std::string dir, picture;
  int picture_rows, picture_extent, clip_rows;
};

std::ostream& operator<<(std::ostream& os, const OmniServed& p) {
  return os << p.name;
}

const OmniServed kServed[] = {
    // 5 x 4 merged tokens; a 30-s window of 750 rows
    {"qwen25o", kData + "qwen25o/", kData + "qwen_vision/img_140x112.png", 20, 5, 750},
    // 9 x 8 merged tokens; 201 mel frames, 3 chunks of 13 rows
    {"qwen3omni", kData + "qwen3omni/", kData + "qwen3vl/img_288x256.png", 72, 9, 39},
};

class ServerOmni : public ::testing::TestWithParam<OmniServed> {};

std::unique_ptr<Server> omni_server(const std::string& dir) {
  auto model = tiny::load(dir + "decoder.gguf");
  EXPECT_TRUE(model);
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = dir + "mmproj.gguf";
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

// The reply's media segments (usage.kamera.segments[i].media), in prompt order.
std::vector<json> media_segments(const json& reply) {
  std::vector<json> out;
  for (const json& s : reply["usage"]["kamera"]["segments"])
    if (s.value("media", false)) out.push_back(s);
  return out;
}

std::vector<std::string> sources(const json& reply) {
  std::vector<std::string> out;
  for (const json& s : media_segments(reply)) out.push_back(s["source"].get<std::string>());
  return out;
}

}  // namespace

TEST_P(ServerOmni, PictureAndClipInOneMessageEncodedOnceExactAndRelocated) {
  const OmniServed& p = GetParam();
  auto server = omni_server(p.dir);
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(120, 0);
  const json picture =
      picture_chat::image_part("data:image/png;base64," + base64(file_bytes(p.picture)));
  const json clip = {
      {"type", "input_audio"},
      {"input_audio", {{"data", base64(file_bytes(p.dir + "clip_16k.wav"))}, {"format", "wav"}}}};
  int st = 0;
  const json a = picture_chat::chat_body({picture,
                                          {{"type", "text"}, {"text", "the"}},
                                          clip,
                                          {{"type", "text"}, {"text", "What is in them?"}}});
  const json first = post(client, a, &st);
  ASSERT_EQ(st, 200) << first.dump();
  EXPECT_EQ(first["usage"]["images"]["count"], 1) << first.dump();
  EXPECT_EQ(first["usage"]["images"]["audio_clips"], 1);
  EXPECT_EQ(first["usage"]["images"]["encoded"], 2);
  EXPECT_EQ(first["usage"]["images"]["image_tokens"], p.picture_rows + p.clip_rows);
  EXPECT_EQ(first["usage"]["completion_tokens"], 6);
  ASSERT_EQ(media_segments(first).size(), 2u);
  // the clip starts past the picture's extent (its rows advance max(rows, cols) positions) and
  // the vision half's closing and the audio half's opening delimiters between them
  const std::vector<json> at = media_segments(first);
  EXPECT_GE(at[1]["position"].get<int>(), at[0]["position"].get<int>() + p.picture_extent + 2)
      << first.dump();

  const json second = post(client, a, &st);
  ASSERT_EQ(st, 200) << second.dump();
  EXPECT_EQ(second["usage"]["images"]["encoded"], 0);
  EXPECT_EQ(second["usage"]["images"]["cached_embeddings"], 2);
  EXPECT_EQ(sources(second), (std::vector<std::string>{"prefix", "prefix"}));
  EXPECT_EQ(second["choices"][0]["message"]["content"], first["choices"][0]["message"]["content"]);

  // the other way round, after other text: both relocated from the first request's context
  const json b = picture_chat::chat_body({{{"type", "text"}, {"text", "Something else first: "}},
                                          clip,
                                          {{"type", "text"}, {"text", " and "}},
                                          picture,
                                          {{"type", "text"}, {"text", "?"}}});
  const json moved = post(client, b, &st);
  ASSERT_EQ(st, 200) << moved.dump();
  EXPECT_EQ(moved["usage"]["images"]["encoded"], 0) << moved.dump();
  EXPECT_EQ(moved["usage"]["images"]["reused_chunks"], 2) << moved.dump();
  EXPECT_EQ(sources(moved), (std::vector<std::string>{"context-nearest", "context-nearest"}))
      << moved.dump();
  json fresh_body = b;
  fresh_body["reuse"] = "reprefill";
  const json fresh = post(client, fresh_body, &st);
  ASSERT_EQ(st, 200) << fresh.dump();
  EXPECT_EQ(sources(fresh), (std::vector<std::string>{"reprefilled", "reprefilled"}));
  const json again = post(client, b, &st);
  ASSERT_EQ(st, 200) << again.dump();
  EXPECT_EQ(sources(again), (std::vector<std::string>{"prefix", "prefix"}));
  EXPECT_EQ(again["choices"][0]["message"]["content"], fresh["choices"][0]["message"]["content"]);
  EXPECT_EQ(again["usage"]["completion_tokens"], fresh["usage"]["completion_tokens"]);
  const std::string url = picture["image_url"]["url"].get<std::string>();
  if (std::string(p.name) != "qwen25o") {  // Qwen3-Omni's video timing is not implemented
    const json refused =
        post(client,
             picture_chat::chat_body({json{{"type", "video"}, {"frames", {url, url}}}, clip}), &st);
    EXPECT_EQ(st, 400) << refused.dump();
    EXPECT_NE(refused.dump().find("single frames"), std::string::npos) << refused.dump();
    return;
  }
  // a video part: its frames one chunk of the vision half, its slices at the thinker's 25
  // positions a second (tests/unit/audio/test_omni_video.cpp); the clip comes from the cache
  const json video = {{"type", "video"}, {"frames", {url, url, url, url}}, {"fps", 1.0}};
  const json vid = post(client, picture_chat::chat_body({video, clip}), &st);
  ASSERT_EQ(st, 200) << vid.dump();
  EXPECT_EQ(vid["usage"]["images"]["encoded"], 1) << vid.dump();
  EXPECT_EQ(vid["usage"]["images"]["image_tokens"], 2 * 20 + 750);  // 2 slices of 5 x 4, 30 s
  const std::vector<json> vs = media_segments(vid);
  ASSERT_EQ(vs.size(), 2u);
  // the clip starts past the video's extent (slice 1 at t = 1 * 2 / 1 fps * 25 = 50: 51
  // positions) and <|vision_end|> ... <|audio_bos|> between them
  EXPECT_GE(vs[1]["position"].get<int>(), vs[0]["position"].get<int>() + 51 + 2) << vid.dump();
  EXPECT_EQ(sources(vid), (std::vector<std::string>{"recomputed", "context-nearest"}));
  // sent again: the video an exact prefix, the clip the conversation's own relocated rows
  const json vid_again = post(client, picture_chat::chat_body({video, clip}), &st);
  ASSERT_EQ(st, 200) << vid_again.dump();
  EXPECT_EQ(vid_again["usage"]["images"]["encoded"], 0);
  EXPECT_EQ(sources(vid_again), (std::vector<std::string>{"prefix", "prefix-approximate"}));
}

INSTANTIATE_TEST_SUITE_P(Pairs, ServerOmni, ::testing::ValuesIn(kServed),
                         [](const ::testing::TestParamInfo<OmniServed>& i) {
                           return std::string(i.param.name);
                         });
