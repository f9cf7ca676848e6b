// A conversation keeps what it was answered from (issue 52, item 4), through the chat route on
// stories260K (real weights): conversation 2's first turn is served conversation 1's message from
// conversation 1's context (context-nearest); its second turn is served all of its first turn
// (prompt and reply) as its prefix, recomputing only its new tokens, and says the part past the
// shared message is approximate (prefix-approximate, counted in cached_tokens). The same turn
// with "reuse": "prefix" recomputes that part and answers as a re-prefill does. Before: the
// prefix index kept conversation 2's first turn only up to the shared message, and every later
// turn recomputed its first question and reply again.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/paths.h"
#include "support/test_server.h"

using json = nlohmann::json;

namespace {

int usage_of(const json& r, const char* field) {
  return field == std::string("cached_tokens")
             ? r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>()
             : r["usage"][field].get<int>();
}

int recomputed(const json& r) {
  return usage_of(r, "prompt_tokens") - usage_of(r, "cached_tokens");
}

int served(const json& r, const std::string& source) {
  int n = 0;
  for (const json& s : r["usage"]["kamera"]["segments"])
    if (s["source"] == source) n += s["tokens"].get<int>();
  return n;
}

const json kSystem = {{"role", "system"}, {"content", "Tell stories."}};
const json kShared = {{"role", "user"},
                      {"content",
                       "Lily had a big red ball and she liked to play with it in the park with "
                       "her mom and her dog every day."}};

json body(json messages, const char* reuse = nullptr) {
  json b = {{"messages", std::move(messages)},
            {"max_tokens", 8},
            {"temperature", 0},
            {"logprobs", true},
            {"top_logprobs", 5}};
  if (reuse) b["reuse"] = reuse;
  return b;
}

json user(const std::string& text) {
  return {{"role", "user"}, {"content", text}};
}

}  // namespace

TEST(ServerConversationKeeps, ALaterTurnReusesWhatItsFirstTurnWasAnsweredFrom) {
  const std::string model = test_paths::stories_dir() + "/stories260K.gguf";
  REQUIRE_MODEL_FILE(model);
  kamera::ServerOptions o;
  o.chat_template = "chatml";
  tiny::TestServer s(o, model);
  int st = 0;
  const json c1 =
      s.post("/v1/chat/completions", body({kSystem, kShared, user("What did Lily do?")}), &st);
  ASSERT_EQ(st, 200) << c1.dump();
  // Conversation 2: its own first message, then conversation 1's, then a long question.
  const json intro = user("Tom was a little boy who liked to run and jump in the sun.");
  const json q1 = user("Then Tom and Lily went to the park to play and they saw a big tree.");
  const json t1 = s.post("/v1/chat/completions", body({kSystem, intro, kShared, q1}), &st);
  ASSERT_EQ(st, 200) << t1.dump();
  ASSERT_GT(served(t1, "context-nearest"), 20) << t1["usage"].dump();
  const json reply = {{"role", "assistant"}, {"content", t1["choices"][0]["message"]["content"]}};
  const json turn2 = {kSystem, intro, kShared, q1, reply, user("What was in the tree?")};
  const json t2 = s.post("/v1/chat/completions", body(turn2), &st);
  ASSERT_EQ(st, 200) << t2.dump();
  // Only the new tokens are recomputed, less the reply's tokens turn 1 decoded (their rows are
  // held), but for the reply's last one and where its text tokenizes otherwise (before: all of
  // them, the reply recomputed).
  const int fresh = usage_of(t2, "prompt_tokens") - usage_of(t1, "prompt_tokens");
  const int decoded = usage_of(t1, "completion_tokens");
  ASSERT_GT(decoded, 4) << t1.dump();
  EXPECT_LE(recomputed(t2), fresh - decoded + 3)
      << "new tokens " << fresh << ": " << t2["usage"].dump();
  EXPECT_GE(served(t2, "prefix-approximate"), served(t1, "context-nearest")) << t2["usage"].dump();
  EXPECT_EQ(usage_of(t2, "cached_tokens"),
            served(t2, "prefix") + served(t2, "prefix-approximate") + 1);  // + the anchor
  // /v1/stats shows the tail (published after the engine's step: polled for a moment).
  json stats;
  for (int i = 0; i < 50; ++i) {
    stats = s.get("/v1/stats", &st);
    if (stats["prefix_cache"]["approximate_tokens"].get<int>() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(stats["prefix_cache"]["approximate_tokens"].get<int>(), 0) << stats.dump();
  // Prefix-only reuse: nothing approximate, the shared message and the rest recomputed, and the
  // re-prefill's answer.
  const json p2 = s.post("/v1/chat/completions", body(turn2, "prefix"), &st);
  ASSERT_EQ(st, 200) << p2.dump();
  const json r2 = s.post("/v1/chat/completions", body(turn2, "reprefill"), &st);
  ASSERT_EQ(st, 200) << r2.dump();
  EXPECT_EQ(served(p2, "prefix-approximate"), 0);
  EXPECT_GE(recomputed(p2), recomputed(t2) + served(t1, "context-nearest"));
  auto logprob = [](const json& j) {
    return j["choices"][0]["logprobs"]["content"][0]["logprob"].get<double>();
  };
  EXPECT_NEAR(logprob(p2), logprob(r2), 1e-5);
  EXPECT_EQ(p2["choices"][0]["message"]["content"], r2["choices"][0]["message"]["content"]);
  const std::string metrics = s.client->Get("/metrics")->body;
  EXPECT_NE(metrics.find("kamera_segments_total{source=\"prefix_approximate\"} 1"),
            std::string::npos);
}
