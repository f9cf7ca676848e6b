// GET /v1/stats and /metrics show the one budget the cached KV lives under (cache/cached_pages.h):
// the budget in pages and bytes, the pages prefix entries and segment occurrences hold, those both
// hold (each page counted once in the total), and the evictions. The reference is a count made
// from the requests' own token counts and the pool's page size: a chat's prefix entry holds the
// pages its tokens fill, its segments lie inside them (every one of their pages is shared), and a
// completion that shares no token with it past the anchor shares none of its pages.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "context/context.h"
#include "support/test_server.h"

using json = nlohmann::json;

namespace {

const int64_t kPage = kamera::ContextOptions{}.page_tokens;  // the server's pool pages

int64_t pages(int64_t tokens) {
  return (tokens + kPage - 1) / kPage;
}

json chat(const std::string& system) {
  return {{"messages",
           {{{"role", "system"}, {"content", system}},
            {{"role", "user"}, {"content", "The cat sat on the red step of the old house."}},
            {{"role", "user"}, {"content", "A boy ran down the hill with a kite."}},
            {{"role", "user"}, {"content", "What changed?"}}}},
          {"max_tokens", 1},
          {"temperature", 0}};
}

const json kOther = {{"prompt", "Zebras graze on the wide plain while the sun sets behind them."},
                     {"max_tokens", 1},
                     {"temperature", 0}};

kamera::ServerOptions options(int64_t prefix_tokens, int64_t segment_pages, int64_t page_bytes) {
  kamera::ServerOptions o;
  o.prefix_cache_tokens = prefix_tokens;
  o.segment_cache_bytes = segment_pages * page_bytes;
  o.segment_compact_tokens = 0;  // no patch replaces rows behind the test's back
  return o;
}

// /v1/stats once the scheduler has published what `ready` waits for (it publishes after each
// step; a few seconds at most), or the last one read.
json stats_when(tiny::TestServer& s, const std::function<bool(const json&)>& ready) {
  json st;
  for (int i = 0; i < 300; ++i) {
    int code = 0;
    st = s.get("/v1/stats", &code);
    EXPECT_EQ(code, 200);
    if (ready(st["cached_kv"])) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return st;
}

// The bytes of one pool page, as the KV pool reports them once it has served a request.
int64_t page_bytes_of_pool() {
  tiny::TestServer probe;
  int code = 0;
  probe.post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 1}}, &code);
  EXPECT_EQ(code, 200);
  int64_t b = 0;
  for (int i = 0; i < 300 && b == 0; ++i) {  // published after the scheduler's step
    b = probe.get("/v1/stats")["kv_pool"]["page_bytes"].get<int64_t>();
    if (b == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(b, 0);
  return b;
}

double metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

}  // namespace

TEST(ServerCachedKv, StatsCountTheOneBudgetsPagesOnceEach) {
  const int64_t page_bytes = page_bytes_of_pool();
  tiny::TestServer s(options(64 * kPage, 8, page_bytes));
  int code = 0;
  const json a = s.post("/v1/chat/completions", chat("You describe what you see."), &code);
  ASSERT_EQ(code, 200) << a.dump();
  const int64_t prompt_a = a["usage"]["prompt_tokens"].get<int64_t>();
  json st = stats_when(s, [&](const json& c) { return c["prefix_pages"] == pages(prompt_a); });
  const json c = st["cached_kv"];
  // The budget: the prefix share's pages and the segments', in pages and bytes.
  EXPECT_EQ(c["budget_pages"].get<int64_t>(), 64 + 8) << c.dump();
  EXPECT_EQ(c["budget_bytes"].get<int64_t>(), (64 + 8) * page_bytes) << c.dump();
  EXPECT_EQ(c["page_bytes"].get<int64_t>(), page_bytes);
  // The prompt's pages (the one generated token is sampled, never forwarded): the prefix entry
  // holds them all; the segments lie inside them, so every page of theirs is shared and the
  // total counts each once.
  const int64_t held_a = pages(prompt_a);
  EXPECT_EQ(c["prefix_pages"].get<int64_t>(), held_a) << c.dump();
  EXPECT_GT(c["segment_pages"].get<int64_t>(), 0) << c.dump();
  EXPECT_LE(c["segment_pages"].get<int64_t>(), held_a) << c.dump();
  EXPECT_EQ(c["shared_pages"], c["segment_pages"]) << c.dump();
  EXPECT_EQ(c["pages"].get<int64_t>(), held_a) << c.dump();
  EXPECT_EQ(c["bytes"].get<int64_t>(), held_a * page_bytes) << c.dump();
  EXPECT_EQ(c["evictions"], 0) << c.dump();

  // A completion that shares no token with the chat past the anchor: its prefix entry and its
  // segment take pages of their own, none of the chat's.
  const json b = s.post("/v1/completions", kOther, &code);
  ASSERT_EQ(code, 200) << b.dump();
  const int64_t prompt_b = b["usage"]["prompt_tokens"].get<int64_t>();
  const int64_t held = held_a + pages(prompt_b);
  st = stats_when(s, [&](const json& d) { return d["prefix_pages"] == held; });
  const json d = st["cached_kv"];
  EXPECT_EQ(d["prefix_pages"].get<int64_t>(), held) << d.dump();
  EXPECT_EQ(d["pages"].get<int64_t>(), held) << d.dump();
  EXPECT_EQ(d["shared_pages"], d["segment_pages"]) << d.dump();
  EXPECT_GT(d["segment_pages"].get<int64_t>(), c["segment_pages"].get<int64_t>()) << d.dump();

  // /metrics: the same numbers.
  const std::string m = s.client->Get("/metrics")->body;
  EXPECT_EQ(metric(m, "kamera_cached_kv_budget_pages"), 64 + 8);
  EXPECT_EQ(metric(m, "kamera_cached_kv_pages"), double(held));
  EXPECT_NE(m.find("kamera_cached_kv_holder_pages{holder=\"shared\"} " +
                   std::to_string(d["shared_pages"].get<int64_t>())),
            std::string::npos)
      << m;
}

// A budget smaller than two chats: the least recently used gives pages back until the total is
// within it, and the evictions are counted.
TEST(ServerCachedKv, PastTheBudgetTheTotalStaysWithinItAndEvictionsAreCounted) {
  const int64_t page_bytes = page_bytes_of_pool();
  int code = 0;
  tiny::TestServer s(options(8 * kPage, 2, page_bytes));  // one chat's pages, not three
  for (const char* system : {"You describe what you see.", "Answer in one word, always.",
                             "Count the birds in each line."}) {
    const json r = s.post("/v1/chat/completions", chat(system), &code);
    ASSERT_EQ(code, 200) << r.dump();
  }
  const json st = stats_when(s, [](const json& c) { return c["evictions"].get<int64_t>() > 0; });
  const json& c = st["cached_kv"];
  EXPECT_EQ(c["budget_pages"].get<int64_t>(), 10) << c.dump();
  EXPECT_LE(c["pages"].get<int64_t>(), 10) << c.dump();
  EXPECT_EQ(c["pages"].get<int64_t>(),
            c["prefix_pages"].get<int64_t>() + c["segment_pages"].get<int64_t>() -
                c["shared_pages"].get<int64_t>() + c["patch_pages"].get<int64_t>())
      << c.dump();
  EXPECT_GE(c["evictions"].get<int64_t>(), 1) << c.dump();
}
