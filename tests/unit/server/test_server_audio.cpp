// Qwen2.5-Omni audio in /v1/chat/completions on the committed tiny pair (tests/data/qwen25o: the
// mmproj with both halves as llama.cpp's converter writes it, beside a qwen2vl thinker). An
// input_audio part (WAV) becomes one chunk of the clip's rows between <|audio_bos|> and
// <|audio_eos|>; it is encoded once; sent again it is an exact prefix, moved it is relocated from
// the context it was seen in, and the greedy tokens of an exact hit equal a re-prefill's. The
// clip as FLAC (lossless) is the WAV's clip, served from the cache; as MP3 it is a clip of its own.
// Other formats, bytes of another container than declared, broken files, a clip too long for the
// context and audio to a server without it are refused by name (pictures and clips together:
// test_server_omni.cpp).
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/server.h"
#include "support/audio_encode.h"
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

std::string bytes_of(const std::vector<uint8_t>& b) {
  return std::string(b.begin(), b.end());
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

// The clip as FLAC decodes to the WAV's samples: the same clip, found in the cache the WAV's
// request filled; as MP3 (lossy) it is another clip, encoded once.
TEST(ServerAudio, FlacIsTheWavsClipMp3IsAccepted) {
  auto server = omni_server(kDir + "mmproj.gguf");
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(120, 0);
  const std::string wav = file_bytes(kDir + "clip_16k.wav");
  const auto pcm = audio_encode::wav_pcm16(wav);
  const auto flac = audio_encode::flac16k(pcm);
  const auto mp3 = audio_encode::mp3_16k(pcm);
  ASSERT_FALSE(flac.empty());
  ASSERT_FALSE(mp3.empty());
  int st = 0;
  auto ask = [&](const std::string& bytes, const std::string& format) {
    return post(client,
                picture_chat::chat_body(
                    {audio_part(base64(bytes), format), {{"type", "text"}, {"text", "?"}}}),
                &st);
  };
  json r = ask(wav, "wav");
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(r["usage"]["images"]["encoded"], 1);
  r = ask(bytes_of(flac), "flac");
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(r["usage"]["images"]["audio_clips"], 1);
  EXPECT_EQ(r["usage"]["images"]["encoded"], 0) << r.dump();
  r = ask(bytes_of(mp3), "mp3");
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(r["usage"]["images"]["audio_clips"], 1);
  EXPECT_EQ(r["usage"]["images"]["encoded"], 1) << r.dump();
  EXPECT_EQ(r["usage"]["images"]["image_tokens"], 750) << r.dump();
}

TEST(ServerAudio, RefusalsNameTheProblem) {
  auto server = omni_server(kDir + "mmproj.gguf");
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(60, 0);
  const std::string wav = file_bytes(kDir + "clip_16k.wav");
  const auto pcm = audio_encode::wav_pcm16(wav);
  std::string flac = bytes_of(audio_encode::flac16k(pcm));
  std::string mp3 = bytes_of(audio_encode::mp3_16k(pcm));
  // 61 s of silence: over the 60 s whose two 30-s windows (1500 rows) fit the context of 2048
  const std::string long_wav = bytes_of(audio_encode::encode(
      std::vector<int16_t>(61 * 16000), 16000, SF_FORMAT_WAV | SF_FORMAT_PCM_16));
  struct Case {
    json part;
    int status;
    const char* code;
    const char* says;
  };
  std::string broken = wav;
  broken.resize(broken.size() / 2);  // the data chunk cut short
  const std::vector<Case> cases = {
      {audio_part(base64(wav), "ogg-opus"), 415, "unsupported_media_type",
       "format 'ogg-opus' is not supported (wav, mp3, flac)"},
      {audio_part(base64(wav), "aac"), 415, "unsupported_media_type", "(wav, mp3, flac)"},
      {audio_part(base64(wav), "mp3"), 415, "unsupported_media_type",
       "declared MP3, but the bytes are WAV"},
      {audio_part(base64(flac), "wav"), 415, "unsupported_media_type",
       "declared WAV, but the bytes are FLAC"},
      {audio_part(base64(broken)), 400, "invalid_audio", "truncated"},
      {audio_part(base64(flac.substr(0, flac.size() / 2)), "flac"), 400, "invalid_audio",
       "truncated"},
      {audio_part(base64(mp3.substr(0, mp3.size() / 2)), "mp3"), 400, "invalid_audio", "truncated"},
      {audio_part(base64(long_wav)), 413, "audio_too_large", "61.0 s of audio (at most 60 s)"},
      {audio_part("not base64!"), 400, "invalid_base64", "audio"},
      {{{"type", "input_audio"}, {"input_audio", "x"}}, 400, "invalid_media_part", "input_audio"},
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
  const json bad = responses("aac", &st);
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
