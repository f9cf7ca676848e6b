// Kimi-VL in /v1/chat/completions: a tiny random-weight deepseek2 decoder with Kimi-VL's routing
// (make-model --preset kimi-vl-tiny) and a tiny MoonViT tower (kimivl-mmproj). A picture at its
// own resolution is encoded once; sent again it is an exact prefix, moved it is relocated from the
// context it was seen in; the greedy tokens of an exact hit equal a re-prefill's. A video or a
// qwen2vl decoder beside a Kimi tower is refused by name. Where the decoder's vocabulary has
// Kimi-VL's <|media_start|>, <|media_content|> and <|media_end|>, the picture is written between
// them as its chat template does, and they are control tokens only there.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/prompt_parts.h"
#include "server/server.h"
#include "support/base64.h"
#include "support/picture_chat.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "synthetic/synthetic_model.h"
#include "tokenizer/bpe.h"
#include "vision/kimi_chunks.h"
#include "vision/kimi_vision.h"

using namespace kamera;
using json = nlohmann::json;
using picture_chat::chat_body;
using picture_chat::image_part;
using picture_chat::image_segment;

namespace {

const std::string kVision = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_vision/";

std::string png_url(const std::string& path) {
  return "data:image/png;base64," + base64(file_bytes(path));
}

std::string tower_path() {
  static const std::string path = [] {
    const std::string p = unique_temp("kamera-server-kimi-mmproj.gguf");
    auto st = KimiVisionModel::random(*kimi_vision_preset("tiny"), 9).write_gguf(p, DType::F32);
    EXPECT_TRUE(st.ok()) << st.message();
    return p;
  }();
  return path;
}

}  // namespace

TEST(ServerKimi, PictureEncodedOnceExactAndRelocated) {
  auto model = tiny::load(tiny::model_path("deepseek2:kimi-vl-tiny"));
  ASSERT_TRUE(model);
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = tower_path();
  Server server(std::shared_ptr<const Model>(std::move(model)), o);
  ASSERT_TRUE(server.start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  // 10 x 8 patches -> 5 x 4 merged
  picture_chat::expect_picture_reuse(client, png_url(kVision + "img_140x112.png"), 20);
}

TEST(ServerKimi, TowerNeedsADeepseek2DecoderOfItsWidth) {
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = tower_path();
  Server server(std::shared_ptr<const Model>(tiny::load(tiny::model_path("qwen2vl"))), o);
  const Status s = server.start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("deepseek2"), std::string::npos) << s.message();
}

namespace {

// 256 byte pieces (no merges), then Kimi-VL's three media tokens.
const Tokenizer& media_tokenizer() {
  static const auto tok = [] {
    Tokenizer::Vocab v;
    v.kind = VocabKind::Bpe;
    v.pre = "qwen2";
    for (int b = 0; b < 256; ++b) v.pieces.push_back(gpt2_byte_char(uint8_t(b)));
    v.types.assign(256, TokenType::Normal);
    for (std::string_view t : {kMediaStart, kMediaContent, kMediaEnd}) {
      v.pieces.emplace_back(t);
      v.types.push_back(TokenType::Control);
    }
    v.bos = v.eos = -1;
    v.add_bos = false;
    return Tokenizer::from_vocab(v);
  }();
  return *tok;
}

std::vector<int32_t> bytes_of(std::string_view s) {
  return std::vector<int32_t>(s.begin(), s.end());  // one token a byte (ASCII)
}

}  // namespace

TEST(ServerKimi, DelimitersAroundAPictureAreControlTokensThereOnly) {
  const Tokenizer& tok = media_tokenizer();
  const VisionDelimiters d = kimi_delimiters(&tok);
  std::vector<int32_t> open = {256};
  for (int32_t b : bytes_of("image")) open.push_back(b);
  open.push_back(257);
  EXPECT_EQ(d.open, open);
  EXPECT_EQ(d.close, std::vector<int32_t>{258});
  // The prompt writes them around a picture of the request (its image part, the chunk from
  // RequestMedia by the part's place), as its own text.
  RequestMedia media;
  const ChunkId id = *ChunkId::from_hex(std::string(32, 'e'));
  media.chunks.emplace_back(id,
                            std::make_shared<const ChunkContent>(ChunkContent::from_tokens({1})));
  MediaPart& part = media.parts.emplace_back();  // as the server fills it (media_parts.cpp)
  part.content = 1;                              // the prompt's part 1 (messages[0].content[1])
  part.id = id;
  part.rows = 1;
  part.open_text = d.open_text;
  part.close_text = d.close_text;
  part.open_control = {{0, kMediaStart.size()},
                       {d.open_text.size() - kMediaContent.size(), d.open_text.size()}};
  part.close_control = {{0, d.close_text.size()}};
  const json prompt = {
      "look ", {{"type", "image_url"}, {"image_url", "data:image/png;base64,AAAA"}}, " now"};
  auto parts = completion_prompts(prompt, 259, &media);
  ASSERT_TRUE(parts.ok()) << parts.message();
  ASSERT_EQ(parts->front().size(), 3u);
  const PromptPart& before = parts->front()[0];
  const PromptPart& after = parts->front()[2];
  EXPECT_EQ(before.text, "look " + d.open_text);
  EXPECT_EQ(after.text, d.close_text + " now");
  std::vector<int32_t> want_before = bytes_of("look ");
  want_before.insert(want_before.end(), open.begin(), open.end());
  EXPECT_EQ(text_part_ids(tok, before, true, ControlSpots{}), want_before);
  std::vector<int32_t> want_after = {258};
  for (int32_t b : bytes_of(" now")) want_after.push_back(b);
  EXPECT_EQ(text_part_ids(tok, after, false, ControlSpots{}), want_after);
  ASSERT_TRUE(parts->front()[1].is_chunk);
  EXPECT_EQ(parts->front()[1].id, id);
  // the same text a client wrote next to the picture is the client's: bytes
  const json spelled = {
      "look " + d.open_text, {{"type", "chunk"}, {"id", id.hex()}}, d.close_text + " now"};
  auto own = completion_prompts(spelled, 259, nullptr);
  ASSERT_TRUE(own.ok()) << own.message();
  ASSERT_EQ(own->front().size(), 3u);
  EXPECT_EQ(text_part_ids(tok, own->front()[0], true, ControlSpots{}), bytes_of(before.text));
  EXPECT_EQ(text_part_ids(tok, own->front()[2], false, ControlSpots{}), bytes_of(after.text));
  // a vocabulary without them: no delimiters
  EXPECT_TRUE(kimi_delimiters(nullptr).empty());
}

// End to end: a decoder whose vocabulary has the media tokens (make-model --control-tokens) and
// the same weights without them: the picture's prompt is longer by exactly the delimiters' ids.
TEST(ServerKimi, PromptWritesKimiDelimitersWhereTheVocabularyHasThem) {
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(Arch::Deepseek2, "kimi-vl-tiny");
  spec.seed = 7;
  spec.control_tokens = {std::string(kMediaStart), std::string(kMediaContent),
                         std::string(kMediaEnd)};
  const std::string media = unique_temp("kamera-server-kimi-media.gguf");
  ASSERT_TRUE(write_synthetic_gguf(spec, media).ok());
  struct Seen {
    int prompt_tokens = 0, image_position = 0;
    size_t open = 0, close = 0;
  };
  auto serve = [&](const std::string& path) {
    auto model = tiny::load(path);
    EXPECT_TRUE(model);
    Seen seen;
    const VisionDelimiters d = kimi_delimiters(&*model->tokenizer);
    seen.open = d.open.size();
    seen.close = d.close.size();
    ServerOptions o;
    o.port = 0;
    o.threads = 1;
    o.mmproj = tower_path();
    Server server(std::shared_ptr<const Model>(std::move(model)), o);
    EXPECT_TRUE(server.start().ok());
    httplib::Client client("127.0.0.1", server.port());
    client.set_read_timeout(60, 0);
    const json body = chat_body({{{"type", "text"}, {"text", "Look: "}},
                                 image_part(png_url(kVision + "img_140x112.png")),
                                 {{"type", "text"}, {"text", " what is it?"}}});
    auto r = client.Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    if (!r || r->status != 200) return seen;
    const json j = json::parse(r->body);
    seen.prompt_tokens = j["usage"]["prompt_tokens"];
    seen.image_position = image_segment(j)["position"];
    return seen;
  };
  const Seen bare = serve(tiny::model_path("deepseek2:kimi-vl-tiny"));
  const Seen delimited = serve(media);
  EXPECT_EQ(bare.open + bare.close, 0u);
  EXPECT_GE(delimited.open, 3u);  // <|media_start|>, "image" (a token or more), <|media_content|>
  EXPECT_EQ(delimited.close, 1u);
  EXPECT_EQ(delimited.image_position - bare.image_position, int(delimited.open));
  EXPECT_EQ(delimited.prompt_tokens - bare.prompt_tokens, int(delimited.open + delimited.close));
  std::remove(media.c_str());
}
