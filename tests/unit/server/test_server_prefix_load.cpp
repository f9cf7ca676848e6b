// Exact prefix reuse under load and near its budget (issue 46, item 5): conversations that resend
// their whole history each turn with "reuse": "prefix" find the previous turn in the prefix index
// when 32 of them run at once in a pool the cache shares with the decoding, and keep most of it
// when their prompts together exceed the cache's budget.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/test_server.h"

using json = nlohmann::json;

namespace {

const char* kSystem =
    "You are the assistant of a small shop that sells bicycles, spare parts and tools. Answer "
    "briefly, name the part and its price, and ask one question back when unsure.";
const std::vector<std::string> kWords = {"wheel", "chain", "brake", "saddle", "pedal", "spoke",
                                         "tyre",  "tube",  "pump",  "lamp",   "bell",  "lock",
                                         "frame", "fork",  "gear",  "cable",  "grip",  "rack"};

struct Turn {
  int prompt = 0, cached = 0, completion = 0;
};

// One conversation: its messages so far and what each turn's usage said.
struct Conversation {
  int id = 0;
  json messages = json::array({{{"role", "system"}, {"content", kSystem}}});
  std::vector<Turn> turns;

  // The whole conversation resent plus a new user message of `words` words.
  void next(httplib::Client& c, int words) {
    std::string text = std::to_string(id) + ":";
    for (int i = 0; i < words; ++i)
      text += " " + kWords[size_t(id * 7 + int(turns.size()) * 3 + i * (id + 1)) % kWords.size()];
    messages.push_back({{"role", "user"}, {"content", text}});
    const json body = {
        {"messages", messages}, {"max_tokens", 4}, {"temperature", 0}, {"reuse", "prefix"}};
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json a = json::parse(r->body);
    const json& u = a["usage"];
    turns.push_back({u["prompt_tokens"].get<int>(),
                     u["prompt_tokens_details"]["cached_tokens"].get<int>(),
                     u["completion_tokens"].get<int>()});
    messages.push_back({{"role", "assistant"}, {"content", a["choices"][0]["message"]["content"]}});
  }
};

std::vector<Conversation> conversations(int n) {
  std::vector<Conversation> cs{size_t(n)};
  for (int i = 0; i < n; ++i) cs[size_t(i)].id = i;
  return cs;
}

// Later turns whose cached tokens cover the previous turn's prompt (but its last token, whose
// logits were the first token's), and later turns in all.
std::pair<int, int> served_from_prefix(const std::vector<Conversation>& cs) {
  int hits = 0, later = 0;
  for (const Conversation& c : cs)
    for (size_t t = 1; t < c.turns.size(); ++t, ++later)
      hits += c.turns[t].cached >= c.turns[t - 1].prompt - 1;
  return {hits, later};
}

// Cached tokens of the later turns over their prompt tokens.
double token_hit_rate(const std::vector<Conversation>& cs) {
  int64_t cached = 0, prompt = 0;
  for (const Conversation& c : cs)
    for (size_t t = 1; t < c.turns.size(); ++t)
      cached += c.turns[t].cached, prompt += c.turns[t].prompt;
  return double(cached) / double(std::max<int64_t>(1, prompt));
}

// Every conversation's last prompt and reply: what a cache holding all of them holds.
int64_t working_set(const std::vector<Conversation>& cs) {
  int64_t n = 0;
  for (const Conversation& c : cs) n += c.turns.back().prompt + c.turns.back().completion;
  return n;
}

// Conversations taken in turn by one client: each comes back after all the others.
std::vector<Conversation> in_turn(tiny::TestServer& s, int n, int turns, int first_words) {
  std::vector<Conversation> cs = conversations(n);
  for (int t = 0; t < turns; ++t)
    for (Conversation& c : cs) c.next(*s.client, t == 0 ? first_words : 2);
  return cs;
}

}  // namespace

// 32 clients, 8 turns each, at once, in a pool of 16,384 tokens whose prefix cache may hold 12,288
// (more than the ~11k their conversations reach). A reservation of a whole context per admission
// in flight used to evict the cached prefixes to meet that worst case: no later turn found its
// prefix. The first turns share a long system prompt: all but the first reuse it (held behind
// the admission computing it, or after it).
TEST(ServerPrefixLoad, ThirtyTwoConversationsAtOnceFindTheirPrefix) {
  kamera::ServerOptions o;
  o.pool_tokens = 16384;
  o.prefix_cache_tokens = 12288;
  tiny::TestServer s(o);
  std::vector<Conversation> cs = conversations(32);
  std::vector<std::thread> clients;
  for (Conversation& c : cs)
    clients.emplace_back([&s, &c] {
      httplib::Client http("127.0.0.1", s.server->port());
      http.set_read_timeout(60, 0);
      for (int t = 0; t < 8; ++t) c.next(http, 2);
    });
  for (std::thread& t : clients) t.join();
  for (const Conversation& c : cs) ASSERT_EQ(c.turns.size(), 8u) << "conversation " << c.id;
  const auto [hits, later] = served_from_prefix(cs);
  int firsts = 0;
  for (const Conversation& c : cs) firsts += c.turns[0].cached >= c.turns[0].prompt / 2;
  std::printf(
      "working set %lld tokens; %d of %d later turns served from their prefix, token hit "
      "rate %.0f%%; %d of 32 first turns reused the system prompt\n",
      (long long)working_set(cs), hits, later, 100 * token_hit_rate(cs), firsts);
  ASSERT_LE(working_set(cs), o.prefix_cache_tokens) << "the conversations must fit the budget";
  EXPECT_GE(hits, 0.9 * later);
  EXPECT_GE(firsts, 30);
}

// Four conversations opened by long messages of their own, taken in turn, with the budget at 75%
// of their working set. Whole-entry LRU evicted each one just before it came back; entries that
// give back tails keep the head of every conversation.
TEST(ServerPrefixLoad, ABudgetBelowTheWorkingSetKeepsMostOfEachPrompt) {
  int64_t working = 0;
  double room_for_all = 0;
  {
    kamera::ServerOptions o;
    o.prefix_cache_tokens = 8192;
    tiny::TestServer s(o);
    const std::vector<Conversation> cs = in_turn(s, 4, 8, 150);
    working = working_set(cs);
    room_for_all = token_hit_rate(cs);
  }
  kamera::ServerOptions o;
  o.prefix_cache_tokens = working * 3 / 4;
  o.segment_cache_bytes = 0;  // else the segments' share adds to the one budget the prefixes use
  ASSERT_LT(working, 8192);
  tiny::TestServer s(o);
  const double rate = token_hit_rate(in_turn(s, 4, 8, 150));
  std::printf(
      "budget %lld of a working set of %lld tokens: token hit rate %.0f%% (%.0f%% with "
      "room for all)\n",
      (long long)o.prefix_cache_tokens, (long long)working, 100 * rate, 100 * room_for_all);
  EXPECT_GE(rate, 0.6);
}
