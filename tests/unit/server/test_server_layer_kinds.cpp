// The server's automatic reuse on the per-layer-kind families (model/layer_kinds.h): Gemma 3's
// sliding-window layers (make-model's gemma3 tiny: 5 local layers of window 8, one global) and
// SmolLM3's layers without rope, through chat completions on their own templates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_server.h"
#include "support/tiny_models.h"

using json = nlohmann::json;

namespace {

int cached(const json& r) {
  return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
}

int served(const json& r, const std::string& source) {
  int n = 0;
  for (const json& s : r["usage"]["kamera"]["segments"])
    if (s["source"] == source) n += s["tokens"].get<int>();
  return n;
}

// An agent's observations, one per turn: long enough to be segments of their own.
const std::vector<std::string> kObservations = {
    "A grey ship left the harbour at dawn and turned north past the white cliffs.",
    "The market opened late because the baker's cart had lost a wheel on the bridge.",
    "Snow covered the fields by noon and the children built a fort behind the school.",
    "An old man fed the ducks at the pond while a dog watched him from the bench.",
    "The library lights stayed on all night as the students wrote their last essays.",
};

// Turn t of an agent's sliding window of 3 observations behind a system message.
json window_turn(int t, const char* reuse = nullptr) {
  json msgs = json::array({{{"role", "system"}, {"content", "You describe what you see."}}});
  for (int i = t; i < t + 3; ++i)
    msgs.push_back({{"role", "user"}, {"content", kObservations[size_t(i)]}});
  msgs.push_back({{"role", "user"}, {"content", "What changed?"}});
  json body = {{"messages", msgs}, {"max_tokens", 6}, {"temperature", 0}};
  if (reuse) body["reuse"] = reuse;
  return body;
}

kamera::ServerOptions with_template(const char* name, bool cache = true) {
  kamera::ServerOptions o;
  o.chat_template = name;
  o.swa_full = true;  // the reuse paths need every row of the sliding-window layers
  if (!cache) {
    o.prefix_cache_tokens = 0;
    o.segment_cache_bytes = 0;
  }
  return o;
}

}  // namespace

// A repeated prompt is served from its prefix and answers as a cold run; after the window slides,
// the survivors (no longer a prefix) are served from the context they were computed in, and the
// sliding-window layers read them at their new positions.
TEST(ServerLayerKinds, SlidingWindowFamilyReusesPrefixesAndSurvivors) {
  const std::string gemma = tiny::model_path("gemma3");
  tiny::TestServer warm(with_template("gemma"), gemma);
  tiny::TestServer cold(with_template("gemma", false), gemma);
  int st = 0;
  const json ref = cold.post("/v1/chat/completions", window_turn(0), &st);
  ASSERT_EQ(st, 200) << ref.dump();
  warm.post("/v1/chat/completions", window_turn(0), &st);
  const json again = warm.post("/v1/chat/completions", window_turn(0), &st);
  ASSERT_EQ(st, 200) << again.dump();
  EXPECT_EQ(cached(again), again["usage"]["prompt_tokens"].get<int>() - 1);
  EXPECT_EQ(again["choices"][0]["message"]["content"], ref["choices"][0]["message"]["content"]);
  const json t1 = warm.post("/v1/chat/completions", window_turn(1), &st);
  ASSERT_EQ(st, 200) << t1.dump();
  EXPECT_GT(served(t1, "context-nearest"), 30) << t1["usage"].dump();
  EXPECT_EQ(t1["usage"]["kamera"]["recomputed_tokens"].get<int>(),
            t1["usage"]["prompt_tokens"].get<int>() - cached(t1));
  // the same turn re-prefilled answers; reuse changed what the segments were conditioned on only
  const json re = warm.post("/v1/chat/completions", window_turn(1, "reprefill"), &st);
  ASSERT_EQ(st, 200) << re.dump();
  EXPECT_EQ(re["usage"]["prompt_tokens"], t1["usage"]["prompt_tokens"]);
}

// Bounded by the window (the default, --swa-full off): the sliding-window layers' rows live in a
// page space of the decoding sequences' windows (and the cached prompts' checkpoints), smaller than
// the full-rows pool's, and a chat answers exactly as on full rows; a repeat resumes at the
// checkpoint kept after its prompt (all but its last token cached) and answers alike.
TEST(ServerLayerKinds, BoundedWindowAnswersAsFullRows) {
  const std::string gemma = tiny::model_path("gemma3");
  kamera::ServerOptions b = with_template("gemma");
  b.swa_full = false;
  b.max_active = 2;  // window space: 4 sequences of 8 + 512 + two pages, under the pool's 4k
  kamera::ServerOptions f = b;
  f.swa_full = true;
  tiny::TestServer bounded(b, gemma), full(f, gemma);
  json body = window_turn(0);
  body["max_tokens"] = 16;
  int st = 0;
  const json want = full.post("/v1/chat/completions", body, &st);
  ASSERT_EQ(st, 200) << want.dump();
  const json got = bounded.post("/v1/chat/completions", body, &st);
  ASSERT_EQ(st, 200) << got.dump();
  EXPECT_GT(got["usage"]["prompt_tokens"].get<int>(), 8 * 8);  // many windows long
  EXPECT_EQ(got["choices"][0]["message"]["content"], want["choices"][0]["message"]["content"]);
  const json again = bounded.post("/v1/chat/completions", body, &st);
  ASSERT_EQ(st, 200) << again.dump();
  EXPECT_EQ(cached(again), again["usage"]["prompt_tokens"].get<int>() - 1) << again["usage"].dump();
  EXPECT_EQ(again["choices"][0]["message"]["content"], want["choices"][0]["message"]["content"]);
  const json kb = bounded.get("/v1/stats")["kv_pool"], kf = full.get("/v1/stats")["kv_pool"];
  EXPECT_EQ(kf["window_pages"].get<int64_t>(), 0);
  ASSERT_GT(kb["window_pages"].get<int64_t>(), 0) << kb.dump();
  EXPECT_LT(kb["bytes"].get<double>(), 0.5 * kf["bytes"].get<double>()) << kb.dump() << kf.dump();
  // one sequence at a time, prefilled in slices of 64: W - 1 + 64 rows, two partial pages; and
  // the cached prompts' checkpoints (the prompt's, the reply's: W - 1 + a page of rows each)
  EXPECT_LE(kb["window_pages_used_max"].get<int64_t>(),
            (8 - 1 + 64 + 2 * 15) / 16 + 1 + 2 * ((8 - 1 + 16 + 2 * 15) / 16 + 1));
  EXPECT_GT(kb["window_pages_used_max"].get<int64_t>(), 0);
}

// A chat's second turn on a bounded pool (the default): served from what the first turn left up
// to a checkpoint the server kept, its new tokens computed, the answer of a server that caches
// nothing; /v1/stats counts the cached prompts as on any model. (Gemma's template trims the
// assistant's content, so on this random-weight model the second turn departs from the reply at
// its first token and resumes at the checkpoint kept after the first turn's prompt:
// SwaPrefixCache.* and CApiSwaFull.* resume at a reply's end.)
TEST(ServerLayerKinds, BoundedWindowResumesAChat) {
  const std::string gemma = tiny::model_path("gemma3");
  kamera::ServerOptions b = with_template("gemma");
  b.swa_full = false;
  b.max_active = 2;
  kamera::ServerOptions c = with_template("gemma", false);
  c.swa_full = false;
  tiny::TestServer bounded(b, gemma), cold(c, gemma);
  int st = 0;
  json body = window_turn(0);
  body["max_tokens"] = 12;
  const json t1 = bounded.post("/v1/chat/completions", body, &st);
  ASSERT_EQ(st, 200) << t1.dump();
  body["messages"].push_back(
      {{"role", "assistant"}, {"content", t1["choices"][0]["message"]["content"]}});
  body["messages"].push_back({{"role", "user"}, {"content", "And after that?"}});
  const json want = cold.post("/v1/chat/completions", body, &st);
  ASSERT_EQ(st, 200) << want.dump();
  const json t2 = bounded.post("/v1/chat/completions", body, &st);
  ASSERT_EQ(st, 200) << t2.dump();
  const int p1 = t1["usage"]["prompt_tokens"].get<int>(),
            p2 = t2["usage"]["prompt_tokens"].get<int>();
  EXPECT_GE(cached(t2), p1) << t2["usage"].dump();  // all of turn 1's prompt, resumed
  EXPECT_EQ(t2["usage"]["kamera"]["recomputed_tokens"].get<int>(), p2 - cached(t2));
  EXPECT_EQ(cached(want), 0);
  EXPECT_EQ(t2["choices"][0]["message"]["content"], want["choices"][0]["message"]["content"]);
  const json pc = bounded.get("/v1/stats")["prefix_cache"];
  EXPECT_GE(pc["entries"].get<int64_t>(), 1) << pc.dump();
  EXPECT_GT(pc["tokens"].get<int64_t>(), 0) << pc.dump();
  RecordProperty("turn2_cached", std::to_string(cached(t2)));
  RecordProperty("turn2_prompt", std::to_string(p2));
  RecordProperty("turn1_prompt", std::to_string(p1));
}

// SmolLM3's template on its tiny model: a chat answers, /no_think in the system message puts the
// empty think block in the prompt (more prompt tokens than /think), and a repeat is served from
// what the server kept (more than 90% of its tokens).
TEST(ServerLayerKinds, Smollm3ChatsOnItsTemplateAndReusesItsPrefix) {
  tiny::TestServer s(with_template("smollm3"), tiny::model_path("smollm3"));
  auto body = [](const char* sys) {
    return json{{"messages", json::array({{{"role", "system"}, {"content", sys}},
                                          {{"role", "user"}, {"content", "Say hello."}}})},
                {"max_tokens", 4},
                {"temperature", 0}};
  };
  int st = 0;
  const json think = s.post("/v1/chat/completions", body("Be brief. /think"), &st);
  ASSERT_EQ(st, 200) << think.dump();
  const json no_think = s.post("/v1/chat/completions", body("Be brief. /no_think"), &st);
  ASSERT_EQ(st, 200) << no_think.dump();
  EXPECT_GT(no_think["usage"]["prompt_tokens"].get<int>(),
            think["usage"]["prompt_tokens"].get<int>());
  // the repeat: its prefix up to the segment the second request took from the first's context,
  // then that segment and the rest served from the segment index (docs/SERVER.md)
  const json again = s.post("/v1/chat/completions", body("Be brief. /no_think"), &st);
  ASSERT_EQ(st, 200) << again.dump();
  const int prompt = again["usage"]["prompt_tokens"].get<int>();
  EXPECT_GT(cached(again), prompt * 9 / 10) << again["usage"].dump();
  EXPECT_EQ(again["usage"]["kamera"]["recomputed_tokens"].get<int>(), prompt - cached(again));
}
