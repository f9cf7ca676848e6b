// The repair budget through the OpenAI routes ("reuse_budget", cache/repair_plan.h): a slide's
// survivors, held from the window they were computed in, are recomputed in context as far as the
// budget pays (the survivor whose context lost the most first), usage says what each segment got,
// and a budget of 1 answers as a re-prefill does. Refused by name where it cannot apply.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "support/test_server.h"

using json = nlohmann::json;

namespace {

const std::vector<std::string> kObservations = {
    "A grey fox crossed the frozen pond at dawn and left a line of small tracks.",
    "The old ferry waited at the pier while two fishermen loaded their nets.",
    "A girl in a yellow coat fed the ducks with crumbs from a paper bag.",
    "Snow covered the station roof and the clock above the door had stopped.",
    "A tall man carried a ladder down the lane towards the broken street lamp.",
};

// Turn t of a sliding window of 4 observations behind a system message, then a question.
json window_turn(int t) {
  json msgs = json::array({{{"role", "system"}, {"content", "You describe what you see."}}});
  for (int i = t; i < t + 4; ++i)
    msgs.push_back({{"role", "user"}, {"content", kObservations[size_t(i)]}});
  msgs.push_back({{"role", "user"}, {"content", "What changed?"}});
  return {{"messages", msgs}, {"max_tokens", 4}, {"temperature", 0}, {"logprobs", true}};
}

double logprob(const json& r) {
  return r["choices"][0]["logprobs"]["content"][0]["logprob"].get<double>();
}

// The slide (turn 1 after turn 0) served on a fresh server with `budget` (null: none named).
json slide(const json& budget, const char* reuse = nullptr, kamera::ServerOptions o = {}) {
  tiny::TestServer s(o);
  int st = 0;
  s.post("/v1/chat/completions", window_turn(0), &st);
  json t1 = window_turn(1);
  if (!budget.is_null()) t1["reuse_budget"] = budget;
  if (reuse) t1["reuse"] = reuse;
  const json r = s.post("/v1/chat/completions", t1, &st);
  EXPECT_EQ(st, 200) << r.dump();
  return r;
}

}  // namespace

TEST(ServerRepair, ABudgetOfOneAnswersAsAReprefill) {
  const json plain = slide(nullptr), full = slide(1.0), ref = slide(nullptr, "reprefill");
  const json& k = full["usage"]["kamera"];
  const int candidates = plain["usage"]["kamera"]["repair"]["candidate_tokens"].get<int>();
  EXPECT_GT(candidates, 30) << plain["usage"].dump();
  EXPECT_EQ(k["repair"]["recomputed_tokens"].get<int>(), candidates) << k.dump();
  EXPECT_EQ(plain["usage"]["kamera"]["repair"]["recomputed_tokens"], 0);
  int shown = 0;  // the tokens of the spans that say they were recomputed by the repair
  for (const json& seg : k["segments"]) {
    EXPECT_NE(seg["source"], "context-nearest") << seg.dump();
    if (seg["repair"]["kind"] == "recomputed")
      shown += seg["repair"]["recomputed_tokens"].get<int>();
  }
  EXPECT_EQ(shown, candidates) << k.dump();
  EXPECT_NEAR(logprob(full), logprob(ref), 1e-4);
  EXPECT_EQ(full["choices"][0]["message"]["content"], ref["choices"][0]["message"]["content"]);
  EXPECT_GT(std::fabs(logprob(plain) - logprob(ref)), 1e-3)
      << "the slide must be one where the plain reuse differs";
  // The server's budget (kamera serve --reuse-budget) for requests that name none.
  kamera::ServerOptions o;
  o.reuse_budget = 1;
  const json by_server = slide(nullptr, nullptr, o);
  EXPECT_EQ(by_server["usage"]["kamera"]["repair"]["budget"], 1.0);
  EXPECT_EQ(by_server["usage"]["kamera"]["repair"]["recomputed_tokens"].get<int>(), candidates);
  EXPECT_NEAR(logprob(by_server), logprob(ref), 1e-4);
  // keep has no repair: the server's budget does not apply to it (nor is it refused).
  const json keep = slide(nullptr, "keep", o);
  EXPECT_EQ(keep["usage"]["kamera"]["repair"]["recomputed_tokens"], 0) << keep["usage"].dump();
}

TEST(ServerRepair, AnIntermediateBudgetRecomputesTheSurvivorWhoseContextChangedMost) {
  const double budget = 0.4;
  const json r = slide(budget);
  const json& k = r["usage"]["kamera"];
  double best_other = -1, repaired_estimate = -1;
  int repaired = 0;
  for (const json& seg : k["segments"]) {
    const json& rep = seg["repair"];
    ASSERT_TRUE(rep.contains("kind")) << seg.dump();
    if (rep["kind"] == "recomputed") {
      EXPECT_EQ(seg["source"], "recomputed");
      EXPECT_EQ(rep["recomputed_tokens"], seg["tokens"]);
      repaired += rep["recomputed_tokens"].get<int>();
      repaired_estimate = std::max(repaired_estimate, rep["estimate"].get<double>());
    } else if (rep["kind"] == "relocated") {
      best_other = std::max(best_other, rep["estimate"].get<double>());
    }
  }
  EXPECT_GT(repaired, 0) << k.dump();
  EXPECT_GT(best_other, 0) << "a survivor the budget did not pay for: " << k.dump();
  EXPECT_GE(repaired_estimate, best_other);
  EXPECT_EQ(k["repair"]["recomputed_tokens"].get<int>(), repaired);
  EXPECT_LE(repaired, budget * k["repair"]["candidate_tokens"].get<double>());
  EXPECT_EQ(k["repair"]["budget"].get<double>(), budget);
}

TEST(ServerRepair, ABudgetThatCannotApplyIsRefusedByName) {
  tiny::TestServer s;
  for (const json& bad : {json("0.2"), json(-0.1), json(1.5), json(true), json::array({0.1})}) {
    json body = window_turn(0);
    body["reuse_budget"] = bad;
    int st = 0;
    const json r = s.post("/v1/chat/completions", body, &st);
    EXPECT_EQ(st, 400) << bad.dump();
    EXPECT_EQ(r["error"]["param"], "reuse_budget") << r.dump();
  }
  for (const char* policy : {"keep", "prefix", "blind", "reprefill"}) {
    json body = window_turn(0);
    body["reuse"] = policy;
    body["reuse_budget"] = 0.15;
    int st = 0;
    const json r = s.post("/v1/chat/completions", body, &st);
    EXPECT_EQ(st, 400) << policy;
    EXPECT_EQ(r["error"]["param"], "reuse_budget") << r.dump();
    body["reuse_budget"] = 0;  // no repair asked: allowed
    s.post("/v1/chat/completions", body, &st);
    EXPECT_EQ(st, 200) << policy;
  }
  // The other endpoints that take "reuse" take it too (and refuse it the same way).
  int st = 0;
  s.post("/v1/completions", {{"prompt", "Rain fell."}, {"max_tokens", 2}, {"reuse_budget", 0.3}},
         &st);
  EXPECT_EQ(st, 200);
  const json m = s.post("/v1/messages",
                        {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                         {"max_tokens", 2},
                         {"reuse_budget", 2}},
                        &st);
  EXPECT_EQ(st, 400) << m.dump();
  s.post("/v1/responses", {{"input", "Hi"}, {"max_output_tokens", 2}, {"reuse_budget", 0.3}}, &st);
  EXPECT_EQ(st, 200);
}
