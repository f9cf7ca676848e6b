// Idle-time repair through the OpenAI routes (cache/idle_repair.h in the scheduler's background
// work): a sliding window's survivors are served from the context they were computed in
// (context-nearest, approximate); once the engine is idle the server prefills that prompt cold and
// keeps it exact, so the same window asked again is served exact and answers as a re-prefill does
// (same first-token log-probability). With --idle-repair off it stays approximate.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/test_server.h"

using json = nlohmann::json;

namespace {

const std::vector<std::string> kObservations = {
    "The red door of the old house was open and a cat sat on the step in the sun.",
    "A boy ran down the hill with a blue kite that pulled hard on its long string.",
    "Two birds built a nest in the tall tree by the river where the water is slow.",
    "The baker put warm bread in the window and the street smelled of it all day.",
    "Rain fell on the tin roof of the barn and the horses listened to the sound.",
};

json window_turn(int t, const char* reuse = nullptr) {
  json msgs = json::array({{{"role", "system"}, {"content", "You describe what you see."}}});
  for (int i = t; i < t + 4; ++i)
    msgs.push_back({{"role", "user"}, {"content", kObservations[size_t(i)]}});
  msgs.push_back({{"role", "user"}, {"content", "What changed?"}});
  json body = {{"messages", msgs}, {"max_tokens", 4}, {"temperature", 0}, {"logprobs", true}};
  if (reuse) body["reuse"] = reuse;
  return body;
}

int served(const json& r, const std::string& source) {
  int n = 0;
  for (const json& s : r["usage"]["kamera"]["segments"])
    if (s["source"] == source) n += s["tokens"].get<int>();
  return n;
}

double metric(tiny::TestServer& s, const std::string& name) {
  const std::string body = s.client->Get("/metrics")->body;
  const size_t at = body.find("\n" + name + " ");
  return at == std::string::npos ? -1.0 : std::stod(body.substr(at + name.size() + 2));
}

double first_logprob(const json& r) {
  return r["choices"][0]["logprobs"]["content"][0]["logprob"].get<double>();
}

}  // namespace

TEST(ServerIdleRepair, AWindowServedFromAnotherContextIsServedExactAfterIdleTime) {
  for (const bool repair : {true, false}) {
    SCOPED_TRACE(repair ? "--idle-repair on" : "--idle-repair off");
    kamera::ServerOptions o;
    o.idle_repair = repair;
    tiny::TestServer s(o);
    int st = 0;
    ASSERT_EQ((s.post("/v1/chat/completions", window_turn(0), &st), st), 200);
    const json slid = s.post("/v1/chat/completions", window_turn(1), &st);
    ASSERT_EQ(st, 200) << slid.dump();
    ASSERT_GT(served(slid, "context-nearest"), 30) << slid["usage"].dump();
    // idle: the refresh runs (or, without repair, nothing does in as long)
    for (int i = 0; i < 100 && metric(s, "kamera_background_refreshes_total") < 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(repair ? 100 : 10));
    EXPECT_EQ(metric(s, "kamera_background_refreshes_total"), repair ? 1 : 0);
    const json again = s.post("/v1/chat/completions", window_turn(1), &st);
    ASSERT_EQ(st, 200) << again.dump();
    const json ref = s.post("/v1/chat/completions", window_turn(1, "reprefill"), &st);
    ASSERT_EQ(st, 200) << ref.dump();
    if (repair) {
      EXPECT_EQ(served(again, "context-nearest"), 0) << again["usage"].dump();
      EXPECT_EQ(again["usage"]["kamera"]["recomputed_tokens"].get<int>(), 1)
          << again["usage"].dump();  // the query's last token only
      EXPECT_NEAR(first_logprob(again), first_logprob(ref), 1e-5);
      EXPECT_EQ(again["choices"][0]["message"]["content"], ref["choices"][0]["message"]["content"]);
    } else {
      // the nearest context's rows, or the same rows kept as this conversation's approximate
      // prefix (the first serve's prompt)
      EXPECT_GT(served(again, "context-nearest") + served(again, "prefix-approximate"), 30)
          << again["usage"].dump();
      EXPECT_GT(std::abs(first_logprob(again) - first_logprob(ref)), 1e-4);
    }
  }
}

// Reranked documents: D after {A, B, C} in one order, then in another (served from the first
// context, then refreshed exact when idle); the set's orbit is formed, and a third order is served
// D from it (context-orbit), which the same requests with --idle-repair off serve from the nearest
// context.
TEST(ServerIdleRepair, AThirdOrderOfASetIsServedTheOrbitOfTheTwoSeen) {
  auto body = [](std::vector<int> order) {
    json msgs = json::array({{{"role", "system"}, {"content", "You rank documents."}}});
    for (int i : order) msgs.push_back({{"role", "user"}, {"content", kObservations[size_t(i)]}});
    msgs.push_back({{"role", "user"}, {"content", kObservations[4]}});  // D
    msgs.push_back({{"role", "user"}, {"content", "Which one is about rain?"}});
    return json{{"messages", msgs}, {"max_tokens", 2}, {"temperature", 0}};
  };
  for (const bool repair : {true, false}) {
    SCOPED_TRACE(repair ? "--idle-repair on" : "--idle-repair off");
    kamera::ServerOptions o;
    o.idle_repair = repair;
    o.segment_compact_tokens = 0;  // rows, not patches: the orbit is of rows
    tiny::TestServer s(o);
    int st = 0;
    ASSERT_EQ((s.post("/v1/chat/completions", body({0, 1, 2}), &st), st), 200);
    ASSERT_EQ((s.post("/v1/chat/completions", body({1, 0, 2}), &st), st), 200);
    for (int i = 0; i < 100 && metric(s, "kamera_background_orbits_total") < 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(repair ? 100 : 10));
    EXPECT_EQ(metric(s, "kamera_background_orbits_total") >= 1, repair);
    const json third = s.post("/v1/chat/completions", body({2, 0, 1}), &st);
    ASSERT_EQ(st, 200) << third.dump();
    int d_orbit = 0;
    for (const json& seg : third["usage"]["kamera"]["segments"])
      if (seg["source"] == "context-orbit") d_orbit += seg["tokens"].get<int>();
    if (repair) {
      EXPECT_GT(d_orbit, 10) << third["usage"].dump();
    } else {
      EXPECT_EQ(d_orbit, 0) << third["usage"].dump();
      EXPECT_GT(served(third, "context-nearest"), 10) << third["usage"].dump();
    }
  }
}
