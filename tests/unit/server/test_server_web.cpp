// What the web page needs from the server (issue 30): the page's files compiled in and served at
// / and /ui/ with a same-origin policy, GET /v1/stats (the store, the caches, the limits, behind
// the API key), and usage.kamera.timings: the first token's measured times and the re-prefill
// estimate from the server's measured prefill speed.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "server/web_assets.h"
#include "support/test_server.h"

using json = nlohmann::json;

namespace {

const json kLong = {
    {"prompt",
     "Once upon a time there was a little girl named Lily. She liked to play in the park with "
     "her red ball. One day the ball rolled away and she ran after it down the hill, past the "
     "old tree and the pond, until it stopped by a small brown dog who looked at her."},
    {"max_tokens", 4},
    {"temperature", 0}};

}  // namespace

TEST(ServerWeb, ThePageIsServedWithASameOriginPolicy) {
  ASSERT_GE(kamera::web_assets().size(), 3u);
  ASSERT_NE(kamera::find_web_asset("/"), nullptr);
  EXPECT_EQ(kamera::find_web_asset("/"), kamera::find_web_asset("/ui/index.html"));
  EXPECT_EQ(kamera::find_web_asset("/ui/none.js"), nullptr);
  kamera::ServerOptions o;
  o.api_keys = {"page-key-0123456789"};
  tiny::TestServer s(o);
  auto page = s.client->Get("/");  // open: the page asks for the key itself
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("/ui/app.js"), std::string::npos);
  const std::string csp = page->get_header_value("Content-Security-Policy");
  for (const char* part :
       {"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"})
    EXPECT_NE(csp.find(part), std::string::npos) << part << " in " << csp;
  EXPECT_EQ(page->get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_FALSE(page->has_header("Access-Control-Allow-Origin"));
  auto js = s.client->Get("/ui/app.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(js->body, std::string(kamera::find_web_asset("/ui/app.js")->body));
  auto missing = s.client->Get("/ui/none.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto traversal = s.client->Get("/ui/../metrics");
  ASSERT_TRUE(traversal);
  EXPECT_NE(traversal->status, 200);
  auto post = s.client->Post("/", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  int st = 0;
  s.get("/v1/stats", &st);
  EXPECT_EQ(st, 401);  // the data behind the page needs the key
  s.client->set_bearer_token_auth("page-key-0123456789");
  const json stats = s.get("/v1/stats", &st);
  EXPECT_EQ(st, 200) << stats.dump();
}

TEST(ServerWeb, StatsSayWhatTheServerHoldsAndHasReused) {
  tiny::TestServer s;
  int st = 0;
  const json before = s.get("/v1/stats", &st);
  ASSERT_EQ(st, 200) << before.dump();
  EXPECT_EQ(before["model"]["meta"]["ctx_len"], s.model->cfg.ctx_len);
  EXPECT_EQ(before["limits"]["ctx_len"], s.model->cfg.ctx_len);
  EXPECT_EQ(before["limits"]["reuse"], "patch");
  EXPECT_TRUE(before["template"]["turns"].get<bool>());
  EXPECT_EQ(before["counters"]["prompt_tokens"], 0);
  EXPECT_TRUE(before["prefill_tokens_per_s"].is_null());
  ASSERT_EQ(s.post("/v1/completions", kLong, &st)["object"], "text_completion");
  const json second = s.post("/v1/completions", kLong, &st);
  ASSERT_EQ(st, 200) << second.dump();
  json after;
  for (int i = 0; i < 100; ++i) {  // published after the scheduler's step
    after = s.get("/v1/stats", &st);
    if (after["prefix_cache"]["entries"].get<int>() > 0) break;
  }
  const int prompt = second["usage"]["prompt_tokens"].get<int>();
  EXPECT_EQ(after["counters"]["prompt_tokens"], 2 * prompt);
  EXPECT_EQ(after["counters"]["reused_tokens"], second["usage"]["kamera"]["reused_tokens"]);
  EXPECT_EQ(after["counters"]["segments_served"]["prefix"], 1);
  EXPECT_GT(after["prefix_cache"]["tokens"].get<int>(), prompt - 2);
  EXPECT_GT(after["prefix_cache"]["budget_tokens"].get<int>(), 0);
  EXPECT_GT(after["kv_pool"]["pages"].get<int>(), 0);
  EXPECT_GT(after["prefill_tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(after["store"]["memory"]["budget_bytes"].is_number(), true);
}

TEST(ServerWeb, TimingsAreMeasuredAndTheSavingIsAnEstimateFromTheMeasuredSpeed) {
  tiny::TestServer s;
  int st = 0;
  const json cold = s.post("/v1/completions", kLong, &st);
  ASSERT_EQ(st, 200) << cold.dump();
  const json& t0 = cold["usage"]["kamera"]["timings"];
  EXPECT_GE(t0["ttft_ms"].get<double>(), t0["prefill_ms"].get<double>());
  EXPECT_GE(t0["queue_ms"].get<double>(), 0);
  // The cold request measured the speed itself: its whole prompt at that speed is its prefill.
  const double speed = t0["prefill_tokens_per_s"].get<double>();
  const int prompt = cold["usage"]["prompt_tokens"].get<int>();
  ASSERT_GT(speed, 0);
  EXPECT_NEAR(t0["reprefill_estimate_ms"].get<double>(), 1e3 * prompt / speed,
              1e-3 * t0["reprefill_estimate_ms"].get<double>() + 0.01);
  // (the anchor is in the prompt but not recomputed: within a few percent)
  EXPECT_NEAR(t0["reprefill_estimate_ms"].get<double>(), t0["prefill_ms"].get<double>(),
              0.05 * t0["prefill_ms"].get<double>() + 0.01);
  EXPECT_LE(t0["saved_estimate_ms"].get<double>(), 0.05 * t0["prefill_ms"].get<double>() + 0.01);
  // The same prompt again: one token recomputed; the estimate is the same prompt at the (same)
  // measured speed, so nearly all of it is saved.
  const json warm = s.post("/v1/completions", kLong, &st);
  ASSERT_EQ(st, 200) << warm.dump();
  const json& t1 = warm["usage"]["kamera"]["timings"];
  EXPECT_EQ(warm["usage"]["kamera"]["recomputed_tokens"], 1);
  EXPECT_DOUBLE_EQ(t1["prefill_tokens_per_s"].get<double>(), std::round(speed * 10) / 10);
  EXPECT_NEAR(t1["saved_estimate_ms"].get<double>(),
              t1["reprefill_estimate_ms"].get<double>() - t1["prefill_ms"].get<double>(), 0.01);
  // Streamed: the usage chunk carries the same fields.
  json body = kLong;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto r = s.client->Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("\"saved_estimate_ms\""), std::string::npos);
}
