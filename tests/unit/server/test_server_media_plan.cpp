// Media parts without a JSON rewrite (server/media_parts.h, server/prompt_parts.h): after
// ServerMedia::prepare the body is the client's, byte for byte, and the prompt code takes each
// image or video part's chunk from the typed RequestMedia where it meets the part. The reference
// for the prompt is the rewrite the server used to make: each media part replaced by a chunk
// part naming its chunk. Both give the same parts (text, control ranges, chunk ids) and token
// ids, with and without a chat template, in a /v1/completions prompt, next to a client's own
// chunk parts (one naming a picture of the request, one naming another chunk) and with an image
// part whose keys come in an unusual order and with a stray "id". End to end, an image sent
// through chat, Anthropic's Messages (an image block) and OpenAI's Responses (input_image) gives
// one prompt, and a bad picture is refused with the same code and its `param`.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "server/media_parts.h"
#include "server/prompt_parts.h"
#include "server/server.h"
#include "support/base64.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "vision/qwen_vision.h"
#include "vision/vl_prompt.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

std::string data_url(const std::string& name) {
  std::ifstream f(std::string(KAMERA_SOURCE_DIR) + "/tests/data/" + name, std::ios::binary);
  const std::string mime = name.ends_with(".png") ? "image/png" : "image/jpeg";
  return "data:" + mime + ";base64," + base64(std::string(std::istreambuf_iterator<char>(f), {}));
}

// The tiny Qwen2-VL tower, written once per process.
const std::string& tower_path() {
  static const std::string p = [] {
    const std::string path = unique_temp("kamera-media-plan-mmproj.gguf");
    auto st = QwenVisionModel::random(*qwen_vision_preset("qwen2vl", "tiny"), 5)
                  .write_gguf(path, DType::F32);
    EXPECT_TRUE(st.ok()) << st.message();
    return path;
  }();
  return p;
}

struct Vl {
  std::shared_ptr<const Model> model = tiny::load(tiny::model_path("qwen2vl"));
  std::unique_ptr<ServerMedia> media;
  ServerMetrics metrics;
  Vl() {
    auto m = ServerMedia::load(tower_path(), *model, MediaOptions{}, 1);
    EXPECT_TRUE(m.ok()) << m.message();
    if (m.ok()) media = std::move(m.value());
  }
};

const std::string kHexOther(32, 'a');  // a client's chunk part naming no picture of the request

// Three distinct pictures (so RequestMedia::chunks is in the parts' order): an image with its
// keys in an unusual order and a stray "id", a video of two frames, another image; text, a
// client's chunk part and a system message around them.
json chat_body() {
  json body = json::parse(R"({"messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [
      {"text": "Look: ", "type": "text"},
      {"image_url": {"url": "IMG_A"}, "id": "ffffffffffffffffffffffffffffffff",
       "type": "image_url"},
      " and ",
      {"type": "video", "frames": ["FRAME_1", {"url": "FRAME_2"}]},
      {"id": ")" + kHexOther +
                          R"(", "type": "chunk"},
      {"type": "text", "text": "What changed?"}]},
    {"role": "assistant", "content": "A colour."},
    {"role": "user", "content": [{"type": "image_url", "image_url": "IMG_B"}, "And here?"]}
  ], "max_tokens": 4})");
  json& m = body["messages"];
  m[1]["content"][1]["image_url"]["url"] = data_url("qwen_preprocess/rgb_61x47.png");
  m[1]["content"][3]["frames"][0] = data_url("qwen_preprocess/color_70x50.jpg");
  m[1]["content"][3]["frames"][1]["url"] = data_url("qwen_vision/img_140x112.png");
  m[3]["content"][0]["image_url"] = data_url("qwen_vision/img_140x112.png");
  return body;
}

// The body as the server used to rewrite it: the k-th media part as {"type": "chunk"} naming
// the k-th chunk (the pictures are distinct: one chunk each, in order).
json rewritten(json body, const RequestMedia& media, const char* key) {
  size_t k = 0;
  auto rewrite = [&](json& content) {
    for (json& p : content) {
      const std::string type = p.is_object() ? p.value("type", "") : "";
      if (type != "image_url" && type != "video") continue;
      EXPECT_LT(k, media.chunks.size());
      if (k < media.chunks.size()) p = {{"type", "chunk"}, {"id", media.chunks[k++].first.hex()}};
    }
  };
  if (std::string(key) == "prompt") {
    rewrite(body["prompt"]);
  } else {
    for (json& m : body["messages"])
      if (m["content"].is_array()) rewrite(m["content"]);
  }
  EXPECT_EQ(k, media.chunks.size());
  return body;
}

// Parts and their token ids equal, part by part.
void expect_same_prompt(const std::vector<PromptPart>& got, const std::vector<PromptPart>& want,
                        const Tokenizer& tok) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].is_chunk, want[i].is_chunk);
    EXPECT_EQ(got[i].text, want[i].text);
    EXPECT_EQ(got[i].id, want[i].id);
    ASSERT_EQ(got[i].control.size(), want[i].control.size());
    for (size_t c = 0; c < got[i].control.size(); ++c) {
      EXPECT_EQ(got[i].control[c].begin, want[i].control[c].begin);
      EXPECT_EQ(got[i].control[c].end, want[i].control[c].end);
    }
    if (!got[i].is_chunk) {
      EXPECT_EQ(text_part_ids(tok, got[i], i == 0, ControlSpots{}),
                text_part_ids(tok, want[i], i == 0, ControlSpots{}));
    }
  }
}

size_t chunk_parts(const std::vector<PromptPart>& parts) {
  size_t n = 0;
  for (const PromptPart& p : parts) n += p.is_chunk;
  return n;
}

}  // namespace

// The body a handler holds after prepare is the client's: no media part replaced, no chunk part
// added; the pictures are in RequestMedia only.
TEST(ServerMediaPlan, PrepareLeavesTheBodyAsTheClientSentIt) {
  Vl vl;
  ASSERT_TRUE(vl.media);
  json body = chat_body();
  const json sent = body;
  RequestMedia media;
  auto refused = vl.media->prepare(body, media, vl.metrics);
  ASSERT_FALSE(refused) << refused->message;
  EXPECT_EQ(media.images, 3);
  EXPECT_EQ(media.frames, 4);
  EXPECT_EQ(media.chunks.size(), 3u);
  EXPECT_TRUE(body == sent) << "the body was rewritten";  // (not printed: megabytes of base64)
  EXPECT_TRUE(body.dump() == sent.dump());
  // the body holds exactly the one chunk part the client sent, and its media parts where they were
  size_t chunks = 0;
  for (const json& m : body["messages"]) {
    if (!m["content"].is_array()) continue;
    for (const json& p : m["content"]) chunks += p.is_object() && p.value("type", "") == "chunk";
  }
  EXPECT_EQ(chunks, 1u);
  EXPECT_EQ(body["messages"][1]["content"][1]["type"], "image_url");
  EXPECT_EQ(body["messages"][1]["content"][3]["type"], "video");
  EXPECT_EQ(body["messages"][3]["content"][0]["type"], "image_url");
  // each media part recorded at its place (messages[i].content[j]) with its chunk and rows
  const std::pair<size_t, size_t> places[] = {{1, 1}, {1, 3}, {3, 0}};
  ASSERT_EQ(media.parts.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const MediaPart* p = media.part(places[k].first, places[k].second);
    ASSERT_NE(p, nullptr) << k;
    EXPECT_EQ(p, &media.parts[k]);
    EXPECT_EQ(p->id, media.chunks[k].first);
    EXPECT_EQ(p->rows, media.chunks[k].second->n());
    EXPECT_EQ(p->open_text, "<|vision_start|>");
    EXPECT_EQ(p->close_text, "<|vision_end|>");
  }
  EXPECT_EQ(media.part(1, 0), nullptr);  // text, and the client's chunk part: not media parts
  EXPECT_EQ(media.part(1, 4), nullptr);
}

// Chat messages, with and without a template, and a /v1/completions prompt of parts: the prompt
// of the body as sent (media from RequestMedia) is the prompt of the old rewrite, token for token.
TEST(ServerMediaPlan, MediaPartsRenderAsTheirChunkPartsDid) {
  Vl vl;
  ASSERT_TRUE(vl.media);
  const Tokenizer& tok = *vl.model->tokenizer;
  const VisionDelimiters d = qwen_delimiters(&tok);
  ASSERT_FALSE(d.empty());  // the pictures stand between delimiters whose control tokens count
  json body = chat_body();
  const json sent = body;
  RequestMedia media;
  auto refused = vl.media->prepare(body, media, vl.metrics);
  ASSERT_FALSE(refused) << refused->message;
  const json reference = rewritten(sent, media, "messages");
  // a client's chunk part naming the first picture: between its delimiters, as before
  json naming = sent;
  naming["messages"][3]["content"].push_back(
      {{"type", "chunk"}, {"id", media.chunks[0].first.hex()}});
  naming["messages"][3]["content"].push_back("Once more.");
  json naming_ref = reference;
  naming_ref["messages"][3]["content"].push_back(naming["messages"][3]["content"][2]);
  naming_ref["messages"][3]["content"].push_back("Once more.");
  auto tmpl = ChatTemplate::named("chatml");
  ASSERT_TRUE(tmpl.ok()) << tmpl.message();
  const std::vector<const ChatTemplate*> templates = {nullptr, &*tmpl};
  const std::vector<std::pair<const json*, const json*>> bodies = {{&body, &reference},
                                                                   {&naming, &naming_ref}};
  for (const ChatTemplate* t : templates) {
    SCOPED_TRACE(t ? "chatml" : "role lines");
    for (const auto& [got_body, want_body] : bodies) {
      auto got = chat_parts(*got_body, t, nullptr, &media);
      ASSERT_TRUE(got.ok()) << got.message();
      auto want = chat_parts(*want_body, t, nullptr, &media);
      ASSERT_TRUE(want.ok()) << want.message();
      expect_same_prompt(*got, *want, tok);
      EXPECT_NE(got->front().text.find(d.open_text), std::string::npos);
      // three pictures and the client's chunk part (and the one naming a picture)
      EXPECT_EQ(chunk_parts(*got), got_body == &body ? 4u : 5u);
    }
  }
  // a /v1/completions prompt of parts, read where it is: its places are (0, j)
  const json prompt_json = {{"prompt", sent["messages"][1]["content"]}};
  const ojson prompt(prompt_json);  // as the server parses a body
  const MediaContent contents{&prompt["prompt"], 0, "prompt"};
  RequestMedia pm;
  ASSERT_FALSE(vl.media->prepare(std::span(&contents, 1), pm, vl.metrics));
  size_t media_parts = 0;
  for (const ojson& part : prompt["prompt"]) {
    const ojson type = part.is_object() ? part.value("type", ojson()) : ojson();
    media_parts += type == "image_url" || type == "video";
  }
  ASSERT_EQ(pm.parts.size(), media_parts);
  for (const MediaPart& m : pm.parts) EXPECT_EQ(m.message, 0u);
  auto got = completion_prompts(prompt["prompt"], vl.model->cfg.n_vocab, &pm);
  ASSERT_TRUE(got.ok()) << got.message();
  const json ref = rewritten(prompt_json, pm, "prompt");
  auto want = completion_prompts(ref["prompt"], vl.model->cfg.n_vocab, &pm);
  ASSERT_TRUE(want.ok()) << want.message();
  ASSERT_EQ(got->size(), 1u);
  ASSERT_EQ(want->size(), 1u);
  expect_same_prompt(got->front(), want->front(), tok);
  EXPECT_EQ(chunk_parts(got->front()), 3u);
}

// One picture through the three APIs: the chat prompt's tokens (usage) are the Messages API's
// (its usage and count_tokens) and the Responses API's, with the same greedy answer; a bad
// picture in each is a 4xx with the chat refusal's code and its place in `param`.
TEST(ServerMediaPlan, ResponsesAndMessagesImagesGiveTheChatPrompt) {
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = tower_path();
  Server server(tiny::load(tiny::model_path("qwen2vl")), o);
  ASSERT_TRUE(server.start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  auto post = [&](const std::string& path, const json& body, int want) {
    auto r = client.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return json();
    EXPECT_EQ(r->status, want) << path << " " << r->body;
    return json::parse(r->body, nullptr, false);
  };
  std::ifstream f(std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_preprocess/rgb_61x47.png",
                  std::ios::binary);
  const std::string png = base64(std::string(std::istreambuf_iterator<char>(f), {}));
  for (const bool bad : {false, true}) {
    SCOPED_TRACE(bad ? "a bad picture" : "a picture");
    const std::string data = bad ? base64("not an image") : png;
    const json chat = {
        {"messages",
         {{{"role", "user"},
           {"content",
            {{{"type", "text"}, {"text", "Look: "}},
             {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + data}}}},
             {{"type", "text"}, {"text", "What is it?"}}}}}}},
        {"max_tokens", 4},
        {"temperature", 0}};
    const json anthropic = {
        {"model", "m"},
        {"max_tokens", 4},
        {"temperature", 0},
        {"messages",
         {{{"role", "user"},
           {"content",
            {{{"type", "text"}, {"text", "Look: "}},
             {{"type", "image"},
              {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", data}}}},
             {{"type", "text"}, {"text", "What is it?"}}}}}}}};
    const json responses = {
        {"max_output_tokens", 4},
        {"temperature", 0},
        {"input",
         {{{"role", "user"},
           {"content",
            {{{"type", "input_text"}, {"text", "Look: "}},
             {{"type", "input_image"}, {"image_url", "data:image/png;base64," + data}},
             {{"type", "input_text"}, {"text", "What is it?"}}}}}}}};
    const int want = bad ? 415 : 200;
    const json c = post("/v1/chat/completions", chat, want);
    const json m = post("/v1/messages", anthropic, want);
    json count = anthropic;
    count.erase("max_tokens");
    count.erase("temperature");
    const json n = post("/v1/messages/count_tokens", count, want);
    const json r = post("/v1/responses", responses, want);
    if (bad) {
      EXPECT_EQ(c["error"]["code"], "unsupported_media_type");
      EXPECT_EQ(c["error"]["param"], "messages[0].content[1]");
      EXPECT_EQ(m["error"]["type"], "invalid_request_error") << m.dump();
      EXPECT_NE(m["error"]["message"].get<std::string>().find("neither PNG nor JPEG"),
                std::string::npos);
      EXPECT_EQ(m["error"]["param"], "messages[0].content[1]");
      json with_system = anthropic;  // the chat body's message 0 is then the system's
      with_system["system"] = "Be brief.";
      EXPECT_EQ(post("/v1/messages", with_system, 415)["error"]["param"], "messages[0].content[1]");
      EXPECT_EQ(r["error"]["code"], "unsupported_media_type");
      EXPECT_EQ(r["error"]["param"], "input[0].content[1]");
      continue;
    }
    const json prompt = c["usage"]["prompt_tokens"];
    EXPECT_GT(prompt.get<int>(), 3);
    EXPECT_EQ(c["usage"]["images"]["count"], 1);
    EXPECT_EQ(m["usage"]["input_tokens"].get<int>() +
                  m["usage"]["cache_creation_input_tokens"].get<int>() +
                  m["usage"]["cache_read_input_tokens"].get<int>(),
              prompt);
    EXPECT_EQ(n["input_tokens"], prompt);
    EXPECT_EQ(r["usage"]["input_tokens"], prompt);
    const std::string answer = c["choices"][0]["message"]["content"];
    EXPECT_EQ(m["content"][0]["text"], answer);
    std::string output;
    for (const json& item : r["output"])
      if (item["type"] == "message") output += item["content"][0]["text"].get<std::string>();
    EXPECT_EQ(output, answer);
  }
  server.stop();
}
