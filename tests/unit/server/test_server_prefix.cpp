// Exact prefix reuse through the OpenAI routes (cache/prefix_index.h in the scheduler): a
// repeated or extended text prompt is served from the KV of what the server computed before, it
// says so in usage.prompt_tokens_details.cached_tokens, and at temperature 0 its output is the
// output of a cold run on a server that caches nothing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_server.h"

using json = nlohmann::json;

namespace {

kamera::ServerOptions prefix_cache(int64_t tokens) {
  kamera::ServerOptions o;
  o.prefix_cache_tokens = tokens;
  return o;
}

int cached(const json& r) {
  return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
}

const json kPrompt = {
    {"prompt",
     "Once upon a time there was a little girl named Lily. She liked to play in the park with "
     "her red ball. One day the ball rolled away and"},
    {"max_tokens", 12},
    {"temperature", 0}};

}  // namespace

TEST(ServerPrefix, ARepeatedPromptReusesItsPrefixAndSaysTheSameAsAColdRun) {
  tiny::TestServer cold(prefix_cache(0));  // caches nothing: every run is a cold run
  tiny::TestServer warm(prefix_cache(-1));
  int st = 0;
  const json ref = cold.post("/v1/completions", kPrompt, &st);
  ASSERT_EQ(st, 200) << ref.dump();
  const json ref2 = cold.post("/v1/completions", kPrompt, &st);
  EXPECT_EQ(cached(ref2), 0);  // nothing cached: nothing reused
  const json first = warm.post("/v1/completions", kPrompt, &st);
  ASSERT_EQ(st, 200) << first.dump();
  EXPECT_EQ(cached(first), 0);
  const json second = warm.post("/v1/completions", kPrompt, &st);
  ASSERT_EQ(st, 200) << second.dump();
  const int prompt = second["usage"]["prompt_tokens"].get<int>();
  EXPECT_EQ(cached(second), prompt - 1);  // all but the last token: its logits are the first's
  EXPECT_EQ(second["usage"]["kamera"]["segments"][0]["source"], "prefix");
  EXPECT_EQ(second["usage"]["kamera"]["recomputed_tokens"], 1);
  for (const json* r : {&first, &second})
    EXPECT_EQ((*r)["choices"][0]["text"], ref["choices"][0]["text"]);
}

TEST(ServerPrefix, AnExtendedPromptReusesThePromptAndTheReplyUpToTheFirstDifferingToken) {
  tiny::TestServer cold(prefix_cache(0));
  tiny::TestServer warm(prefix_cache(-1));
  int st = 0;
  const json first = warm.post("/v1/completions", kPrompt, &st);
  ASSERT_EQ(st, 200) << first.dump();
  // The next turn: the prompt, the reply as text, more text.
  json next = kPrompt;
  next["prompt"] = kPrompt["prompt"].get<std::string>() +
                   first["choices"][0]["text"].get<std::string>() + " Then they went home.";
  const json turn2 = warm.post("/v1/completions", next, &st);
  ASSERT_EQ(st, 200) << turn2.dump();
  EXPECT_GE(cached(turn2), first["usage"]["prompt_tokens"].get<int>() - 1);
  EXPECT_LT(cached(turn2), turn2["usage"]["prompt_tokens"].get<int>());
  EXPECT_EQ(turn2["choices"][0]["text"], cold.post("/v1/completions", next)["choices"][0]["text"]);
  // A prompt that differs in its first word shares no token past the anchor: nothing reused.
  json other = kPrompt;
  other["prompt"] = "Twice" + kPrompt["prompt"].get<std::string>().substr(4);
  EXPECT_EQ(cached(warm.post("/v1/completions", other, &st)), 0);
  // Chat completions report it too.
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                     {"max_tokens", 4},
                     {"temperature", 0}};
  warm.post("/v1/chat/completions", chat, &st);
  const json chat2 = warm.post("/v1/chat/completions", chat, &st);
  ASSERT_EQ(st, 200) << chat2.dump();
  EXPECT_EQ(cached(chat2), chat2["usage"]["prompt_tokens"].get<int>() - 1);
  // The chat's next turn: the reply resent as the assistant's message, then a new user message.
  json turn = chat;
  turn["messages"].push_back(
      {{"role", "assistant"}, {"content", chat2["choices"][0]["message"]["content"]}});
  turn["messages"].push_back({{"role", "user"}, {"content", "And then?"}});
  const json chat3 = warm.post("/v1/chat/completions", turn, &st);
  ASSERT_EQ(st, 200) << chat3.dump();
  EXPECT_GE(cached(chat3), chat2["usage"]["prompt_tokens"].get<int>());
  EXPECT_EQ(chat3["choices"][0]["message"]["content"],
            cold.post("/v1/chat/completions", turn)["choices"][0]["message"]["content"]);
  // The metrics count the prefix segments served.
  auto m = warm.client->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("kamera_segments_total{source=\"prefix\"} 3"), std::string::npos)
      << m->body.substr(0, 400);
}

// The cached prefixes may fill the whole pool; a request that needs its pages gets them (the
// least recently used prefixes are evicted), it is never refused for them.
TEST(ServerPrefix, CachedPrefixesGiveTheirPagesBackWhenARequestNeedsThem) {
  const auto model = tiny::load(tiny::model_path("qwen2"));
  const int ctx = model->cfg.ctx_len, vocab = model->cfg.n_vocab;
  kamera::ServerOptions o;
  o.pool_tokens = 2 * ctx;
  o.prefix_cache_tokens = 2 * ctx;  // as much as the pool holds
  tiny::TestServer s(o);
  auto prompt = [&](int n, int seed) {
    json ids = json::array();
    for (int j = 0; j < n; ++j) ids.push_back(10 + (seed * 131 + j * 7) % (vocab - 20));
    return json{{"prompt", ids}, {"max_tokens", 8}, {"temperature", 0}};
  };
  int st = 0;
  for (int i = 0; i < 6; ++i) {  // 6 x ctx/2 tokens: more than the pool
    const json r = s.post("/v1/completions", prompt(ctx / 2, i), &st);
    ASSERT_EQ(st, 200) << "prompt " << i << ": " << r.dump();
  }
  const json big = prompt(ctx - 64, 99);
  const json r = s.post("/v1/completions", big, &st);
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(cached(r), 0);
  // The big prompt is cached too: sent again, it is reused. The budget (the pool) is shared
  // among the seven prompts (cache/prefix_index.h): the newest gives back what is over its share
  // once the older ones are down to theirs, so it keeps more than half of itself.
  const json again = s.post("/v1/completions", big, &st);
  ASSERT_EQ(st, 200) << again.dump();
  EXPECT_GE(cached(again), (ctx - 64) / 2) << again["usage"].dump();
}

// Prompts that arrive together (one request's prompt array: queued at once) and share a long
// prefix: the first computes it, the others wait for its admission and reuse it
// (SchedulerOptions::hold_shared_tokens) instead of each computing it beside the first; the
// answers stay a cold run's. With the wait off, all four compute it.
TEST(ServerPrefix, PromptsArrivingTogetherComputeTheirSharedPrefixOnce) {
  const std::string shared =
      "Once upon a time there was a little girl named Lily. She liked to play in the park with "
      "her red ball. One day the ball rolled away and she ran after it past the pond, the old "
      "oak tree and the bench where her grandmother sat every morning to feed the ducks. ";
  const json body = {
      {"prompt",
       {shared + "The cat", shared + "Then a dog", shared + "A bird", shared + "Two fish swam"}},
      {"max_tokens", 6},
      {"temperature", 0}};
  kamera::ServerOptions apart = prefix_cache(-1);
  apart.hold_shared_tokens = 0;
  tiny::TestServer held(prefix_cache(-1)), each(apart), cold(prefix_cache(0));
  const auto& tok = *held.model->tokenizer;
  const int64_t shared_tokens = int64_t(tok.encode(shared, false).size());
  ASSERT_GT(shared_tokens, 64) << "the shared prefix must be longer than one prefill slice";
  int st = 0;
  const json ref = cold.post("/v1/completions", body, &st);
  ASSERT_EQ(st, 200) << ref.dump();
  const json a = held.post("/v1/completions", body, &st);
  ASSERT_EQ(st, 200) << a.dump();
  const json b = each.post("/v1/completions", body, &st);
  ASSERT_EQ(st, 200) << b.dump();
  // Three of the four reuse all but the shared prefix's last token or two (its tokenization at
  // the seam may differ by a token).
  EXPECT_GE(cached(a), 3 * (shared_tokens - 2)) << a["usage"].dump();
  EXPECT_LT(cached(b), shared_tokens) << b["usage"].dump();
  auto texts = [](const json& r) {
    std::vector<std::string> t(r["choices"].size());
    for (const json& c : r["choices"]) t.at(c["index"].get<size_t>()) = c["text"];
    return t;
  };
  EXPECT_EQ(texts(a), texts(ref));
  EXPECT_EQ(texts(b), texts(ref));
  auto m = held.client->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("kamera_admissions_held_total 3"), std::string::npos);
}
