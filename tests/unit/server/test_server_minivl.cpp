// The mini-VL served (vision/media_tower.h, server/prompt_parts.h: its word prompt), on a seeded
// random-weight pair of the trained shapes: a chat with frames as PNG image parts and the question
// as text is fed the model's own sequence, [<bos>][frame]...[frame][question words] (no vision
// delimiters, no roles), checked against one re-prefill of that sequence (minivl::clip_logits);
// the word prompt alone on a few part lists.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "context/context.h"
#include "minivl/minivl.h"
#include "server/prompt_parts.h"
#include "server/server.h"
#include "support/base64.h"
#include "support/temp_path.h"
#include "vision/frame_chunk.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

std::vector<int32_t> word_ids(const std::vector<std::string>& words) {
  std::vector<int32_t> out;
  for (const auto& w : words) out.push_back(minivl::word_id(w));
  return out;
}

PromptPart text_part(const std::string& t) {
  PromptPart p;
  p.text = t;
  return p;
}

PromptPart chunk_part(uint64_t lo) {
  PromptPart p;
  p.is_chunk = true;
  p.id = ChunkId{0, lo};
  return p;
}

}  // namespace

TEST(WordPrompt, FramesThenTheQuestionsWordsLookedUpWhole) {
  auto tok = Tokenizer::from_vocab(minivl::word_vocab());
  ASSERT_TRUE(tok.ok()) << tok.message();
  const WordVocab words(*tok);
  auto ids = words.encode("  colour of\tsquare in frame f3 ?\n");
  ASSERT_TRUE(ids.ok()) << ids.message();
  EXPECT_EQ(*ids, word_ids({"colour", "of", "square", "in", "frame", "f3", "?"}));
  auto unknown = words.encode("colour of dog ?");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("'dog'"), std::string::npos) << unknown.message();
  EXPECT_FALSE(words.encode("<bos> red").ok());  // control tokens are not words

  std::vector<PromptPart> parts = {chunk_part(1), text_part(" "), chunk_part(2),
                                   text_part("shape of red"), text_part(" in frame f1 ?")};
  ASSERT_TRUE(to_word_prompt(parts, words).ok());
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_TRUE(parts[0].is_chunk && parts[1].is_chunk);
  EXPECT_EQ(parts[1].id, (ChunkId{0, 2}));
  EXPECT_EQ(parts[2].tokens, word_ids({"shape", "of", "red", "in", "frame", "f1", "?"}));

  std::vector<PromptPart> before = {text_part("red"), chunk_part(1), text_part("shape ?")};
  EXPECT_FALSE(to_word_prompt(before, words).ok());
  std::vector<PromptPart> no_question = {chunk_part(1), text_part("  ")};
  EXPECT_FALSE(to_word_prompt(no_question, words).ok());
}

// The answer's log-probability is the re-prefill's of [<bos>, frames, words], whatever the
// server's reuse policy (patch: each frame's canonical plus its full-rank patch; reprefill).
TEST(ServerMiniVl, ChatIsTheModelsOwnSequence) {
  const std::string dec = unique_temp("kamera-minivl-serve.gguf");
  const std::string vis = unique_temp("kamera-minivl-serve-mmproj.gguf");
  ASSERT_TRUE(minivl::write_random_minivl(dec, vis, 11).ok());
  auto loaded = load_model(dec);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  std::shared_ptr<const Model> model = std::move(*loaded);
  auto tower = VisionModel::load(vis);
  ASSERT_TRUE(tower.ok()) << tower.message();

  const minivl::Clip clip = minivl::make_clip(minivl::Split::Test, 3);
  ASSERT_FALSE(clip.questions.empty());
  const minivl::Question q = clip.questions.front();
  for (int32_t t : q.tokens) ASSERT_TRUE(t >= 0 && size_t(t) < minivl::words().size()) << t;
  json content = json::array();
  std::vector<ChunkContent> frames;
  VisionEncoder enc(*tower);
  for (int f = 0; f < int(clip.frames.size()); ++f) {
    const std::string png = unique_temp("kamera-minivl-frame-" + std::to_string(f) + ".png");
    ASSERT_TRUE(minivl::write_frames_png(png, {clip.frames[size_t(f)]}, 1).ok());
    content.push_back(
        {{"type", "image_url"},
         {"image_url", {{"url", "data:image/png;base64," + base64(file_bytes(png))}}}});
    auto c = frame_chunk(enc, clip.frames[size_t(f)].rgb);
    ASSERT_TRUE(c.ok()) << c.message();
    frames.push_back(std::move(*c));
  }
  std::string words;
  for (int32_t t : q.tokens) words += (words.empty() ? "" : " ") + minivl::words()[size_t(t)];
  content.push_back({{"type", "text"}, {"text", words}});

  auto ref_ctx = Context::create(model, ContextOptions{});
  ASSERT_TRUE(ref_ctx.ok()) << ref_ctx.message();
  auto ref = minivl::clip_logits((*ref_ctx)->engine(), (*ref_ctx)->pool(), frames, q.tokens, false);
  ASSERT_TRUE(ref.ok()) << ref.message();
  const int32_t best = int32_t(std::max_element(ref->begin(), ref->end()) - ref->begin());
  double z = 0;
  for (float l : *ref) z += std::exp(double(l) - (*ref)[size_t(best)]);
  const double best_logprob = -std::log(z);

  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = vis;
  Server server(model, o);
  ASSERT_TRUE(server.start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  for (const char* policy : {"patch", "reprefill", "patch"}) {
    const json body = {{"messages", {{{"role", "user"}, {"content", content}}}},
                       {"temperature", 0},
                       {"logprobs", true},
                       {"reuse", policy}};
    auto r = client.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    EXPECT_EQ(j["usage"]["prompt_tokens"], 1 + 6 * 4 + int(q.tokens.size())) << policy;
    EXPECT_EQ(j["usage"]["completion_tokens"], 1) << policy;  // one word by default
    const json& lp = j["choices"][0]["logprobs"]["content"][0];
    EXPECT_EQ(j["choices"][0]["message"]["content"],
              model->tokenizer->decode(q.tokens.back(), best))
        << policy << " token " << best;
    EXPECT_NEAR(lp["logprob"].get<double>(), best_logprob, 1e-4) << policy << " token " << best;
  }
}

// A sliding window of frames (server/scheduler_text.cpp: image parts are segments too): the
// frames that survive a slide are served from the KV they had in the previous window
// (context-nearest) and only the new frame and the question are prefilled; once a re-prefill has
// computed the window, the same window is the exact prefix of the prompt (the prefix index
// compares frames by their ids, row by row), with
// the re-prefill's answer log-probability.
TEST(ServerMiniVl, ASlideOfFramesReusesTheSurvivors) {
  const std::string dec = unique_temp("kamera-minivl-slide.gguf");
  const std::string vis = unique_temp("kamera-minivl-slide-mmproj.gguf");
  ASSERT_TRUE(minivl::write_random_minivl(dec, vis, 12).ok());
  auto loaded = load_model(dec);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  std::shared_ptr<const Model> model = std::move(*loaded);
  const minivl::Clip clip = minivl::make_clip(minivl::Split::Test, 3);
  ASSERT_GE(clip.frames.size(), 5u);
  const minivl::Question q = clip.questions.front();
  std::string words;
  for (int32_t t : q.tokens) words += (words.empty() ? "" : " ") + minivl::words()[size_t(t)];
  auto window = [&](int first, const char* reuse) {
    json content = json::array();
    for (int f = first; f < first + 4; ++f) {
      std::string name = "kamera-minivl-slide-";
      name += std::to_string(f);
      name += ".png";
      const std::string png = unique_temp(name);
      EXPECT_TRUE(minivl::write_frames_png(png, {clip.frames[size_t(f)]}, 1).ok());
      content.push_back(
          {{"type", "image_url"},
           {"image_url", {{"url", "data:image/png;base64," + base64(file_bytes(png))}}}});
    }
    content.push_back({{"type", "text"}, {"text", words}});
    return json{{"messages", {{{"role", "user"}, {"content", content}}}},
                {"temperature", 0},
                {"logprobs", true},
                {"reuse", reuse}};
  };
  ServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.mmproj = vis;
  Server server(model, o);
  ASSERT_TRUE(server.start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  auto post = [&](const json& body) {
    auto r = client.Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return r ? json::parse(r->body) : json();
  };
  auto served = [](const json& j, const std::string& source) {
    int n = 0;
    for (const json& s : j["usage"]["kamera"]["segments"]) n += (s["source"] == source) * 1;
    return n;
  };
  auto logprob = [](const json& j) {
    return j["choices"][0]["logprobs"]["content"][0]["logprob"].get<double>();
  };
  post(window(0, "patch"));
  const json slid = post(window(1, "patch"));
  // Frames 1, 2, 3 (and frame 4 too when the clip repeats a picture seen before: same content,
  // same id); at most the new frame and the question are prefilled.
  const int nearest = served(slid, "context-nearest");
  EXPECT_GE(nearest, 3) << slid["usage"].dump();
  EXPECT_EQ(slid["usage"]["kamera"]["recomputed_tokens"], 4 * (4 - nearest) + int(q.tokens.size()));
  EXPECT_EQ(slid["usage"]["images"]["reused_chunks"], nearest);
  // A re-prefill computes every frame behind its own antecedents (and keeps the prompt): the same
  // window is then served exactly.
  const json ref = post(window(1, "reprefill"));
  EXPECT_EQ(served(ref, "context-exact"), 0);
  const json again = post(window(1, "patch"));  // the exact prefix: every frame
  int frames_in_prefix = 0;
  for (const json& s : again["usage"]["kamera"]["segments"])
    frames_in_prefix += s.value("media", false) && s["source"] == "prefix";
  EXPECT_EQ(frames_in_prefix, 4) << again["usage"].dump();
  EXPECT_EQ(again["usage"]["images"]["reused_chunks"], 4);
  EXPECT_NEAR(logprob(again), logprob(ref), 1e-4);
  EXPECT_EQ(again["choices"][0]["message"]["content"], ref["choices"][0]["message"]["content"]);
}
