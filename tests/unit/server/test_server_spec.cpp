// Speculative decoding by prompt lookup (--spec ngram: serve/scheduler_spec.cpp) end to end on a
// synthetic model: at temperature 0 its outputs are token for token those of plain decoding
// (completions, chat with a forced tool call, a JSON schema with n = 2, a stop string), with
// drafts accepted on prompts that repeat their context; sampled, its outputs follow plain
// decoding's distribution (a two-sample chi-square); the KV of rejected drafts is rolled back, so
// the next turn's prefix reuse serves exactly what a cold server computes; usage and /metrics
// count the drafted and accepted tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "support/test_server.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

const std::string kDims = "ctx=4096";
std::string target_path() {
  return tiny::model_path("qwen2", DType::F32, kDims);
}
// A draft model of the target's vocabulary and shape, other random weights: most drafts rejected.
std::string other_draft() {
  return tiny::model_path("qwen2", DType::F32, kDims, /*seed=*/11);
}

// `draft`: a draft model's file (--spec draft, drafting every token: p-min 0). `forced`:
// --spec-forced (default: off for plain decoding, the reference; on with drafting).
ServerOptions options(const std::string& spec, int64_t prefix_tokens = -1,
                      const std::string& draft = "", const std::string& forced = "") {
  ServerOptions o;
  o.spec = spec;
  o.spec_forced = !forced.empty() ? forced : spec == "none" ? "off" : "on";
  o.model_draft = draft;
  o.spec_draft_p_min = 0;
  o.prefix_cache_tokens = prefix_tokens;
  o.chat_template =
      std::string(KAMERA_SOURCE_DIR) + "/tests/fixtures/chat_templates/templates/qwen2_5.jinja";
  return o;
}

struct Served : tiny::TestServer {
  explicit Served(const std::string& spec, int64_t prefix_tokens = -1,
                  const std::string& draft = "", const std::string& forced = "")
      : TestServer(options(spec, prefix_tokens, draft, forced), target_path()) {}
  // The answer (status 200 asserted by the caller through `ok`).
  json ask(const std::string& route, const json& body) {
    int st = 0;
    json r = post(route, body, &st);
    EXPECT_EQ(st, 200) << r.dump();
    return r;
  }
};

int64_t drafted(const json& r) {
  return r["usage"]["kamera"]["speculative"]["drafted"];
}
int64_t accepted(const json& r) {
  return r["usage"]["kamera"]["speculative"]["accepted"];
}
int64_t forced(const json& r) {
  return r["usage"]["kamera"]["speculative"]["forced"];
}

std::string repeated(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// What must be equal between plain and speculative answers: every choice's text, finish reason,
// tool calls' names and arguments, and the tokens of its logprobs.
json essentials(const json& r) {
  json out = json::array();
  for (const json& c : r["choices"]) {
    json e = {{"finish_reason", c["finish_reason"]}};
    if (c.contains("text")) e["text"] = c["text"];
    if (c.contains("message")) {
      e["content"] = c["message"]["content"];
      for (const json& t : c["message"].value("tool_calls", json::array()))
        e["calls"].push_back({t["function"]["name"], t["function"]["arguments"]});
    }
    if (c.contains("logprobs") && !c["logprobs"].is_null())
      e["tokens"] = c["logprobs"].value("tokens", json::array());
    if (c.contains("logprobs") && c["logprobs"].is_object() && c["logprobs"].contains("content"))
      for (const json& t : c["logprobs"]["content"]) e["tokens"].push_back(t["token"]);
    out.push_back(e);
  }
  return out;
}

const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}}},
                           {"required", {"city"}},
                           {"additionalProperties", false}}}}}};

// Requests whose outputs copy from their context (a repeated sentence, a quoted tool result), and
// constrained ones.
std::vector<std::pair<std::string, json>> greedy_requests() {
  const std::string line = "The quick brown fox jumps over the lazy dog near the river bank. ";
  const std::string quote =
      "Tool result: {\"city\": \"Paris\", \"temp\": 21, \"sky\": \"clear\"}. ";
  json ids = json::array();
  for (int r = 0; r < 5; ++r)
    for (int j = 0; j < 12; ++j) ids.push_back(40 + (j * 37) % 300);
  const json schema = {
      {"type", "object"},
      {"properties", {{"n", {{"type", "integer"}}}, {"ok", {{"type", "boolean"}}}}},
      {"required", {"n", "ok"}},
      {"additionalProperties", false}};
  return {
      {"/v1/completions",
       {{"prompt", repeated(line, 6)}, {"max_tokens", 64}, {"temperature", 0}, {"logprobs", 2}}},
      {"/v1/completions", {{"prompt", ids}, {"max_tokens", 48}, {"temperature", 0}}},
      {"/v1/completions",
       {{"prompt", repeated(line, 4)}, {"max_tokens", 64}, {"temperature", 0}, {"stop", "river"}}},
      {"/v1/chat/completions",
       {{"messages",
         {{{"role", "user"}, {"content", repeated(quote, 4) + "Repeat the tool result."}}}},
        {"max_tokens", 64},
        {"temperature", 0}}},
      {"/v1/chat/completions",
       {{"messages", {{{"role", "user"}, {"content", repeated(quote, 3) + "Weather?"}}}},
        {"tools", {kWeather}},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
        {"max_tokens", 64},
        {"temperature", 0}}},
      {"/v1/chat/completions",
       {{"messages", {{{"role", "user"}, {"content", repeated(quote, 3)}}}},
        {"n", 2},
        {"response_format",
         {{"type", "json_schema"},
          {"json_schema", {{"name", "x"}, {"strict", true}, {"schema", schema}}}}},
        {"max_tokens", 48},
        {"temperature", 0}}},
  };
}

// The two-sample chi-square statistic of two samples' counts (categories with fewer than 10
// observations together pooled into one), and its degrees of freedom.
std::pair<double, int> chi2_two_samples(const std::map<std::string, int>& a,
                                        const std::map<std::string, int>& b) {
  std::map<std::string, std::pair<double, double>> cats;
  for (const auto& [k, n] : a) cats[k].first += n;
  for (const auto& [k, n] : b) cats[k].second += n;
  std::vector<std::pair<double, double>> cells;
  std::pair<double, double> rare{0, 0};
  for (const auto& [k, c] : cats) {
    if (c.first + c.second < 10) {
      rare.first += c.first, rare.second += c.second;
    } else {
      cells.push_back(c);
    }
  }
  if (rare.first + rare.second > 0) cells.push_back(rare);
  double na = 0, nb = 0;
  for (const auto& c : cells) na += c.first, nb += c.second;
  double chi2 = 0;
  for (const auto& [oa, ob] : cells) {
    const double t = oa + ob, ea = t * na / (na + nb), eb = t * nb / (na + nb);
    chi2 += (oa - ea) * (oa - ea) / ea + (ob - eb) * (ob - eb) / eb;
  }
  return {chi2, int(cells.size()) - 1};
}

// The value the chi-square distribution with df degrees of freedom exceeds with the probability
// of a standard normal exceeding z (Wilson-Hilferty; z = 4.3: about 1e-5).
double chi2_limit(int df, double z) {
  const double k = df, a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Asks every greedy request of both servers: the same answers. Returns the speculative one's
// drafted and accepted tokens of each request (their sums checked against its /metrics).
std::vector<std::pair<int64_t, int64_t>> same_greedy_answers(Served& plain, Served& spec) {
  std::vector<std::pair<int64_t, int64_t>> each;
  int64_t all_drafted = 0, all_accepted = 0;
  for (const auto& [route, body] : greedy_requests()) {
    const json want = plain.ask(route, body), got = spec.ask(route, body);
    EXPECT_EQ(essentials(got), essentials(want)) << route << " " << body.dump();
    EXPECT_EQ(got["usage"]["completion_tokens"], want["usage"]["completion_tokens"]);
    EXPECT_EQ(drafted(want), 0);
    EXPECT_LE(accepted(got), drafted(got));
    all_drafted += drafted(got);
    all_accepted += accepted(got);
    each.push_back({drafted(got), accepted(got)});
  }
  EXPECT_GT(all_drafted, 0);
  EXPECT_GT(all_accepted, 0);
  // /metrics counts them.
  auto m = spec.client->Get("/metrics");
  EXPECT_TRUE(m);
  const std::string metrics = m ? m->body : "";
  EXPECT_NE(metrics.find("kamera_spec_drafted_tokens_total " + std::to_string(all_drafted) + "\n"),
            std::string::npos);
  EXPECT_NE(
      metrics.find("kamera_spec_accepted_tokens_total " + std::to_string(all_accepted) + "\n"),
      std::string::npos);
  return each;
}

// Sampled: each of the first tokens has the same distribution with and without speculation. The
// prompt is a random sequence of two tokens and logit_bias leaves only those two to sample, so
// every step has a draft (every short suffix occurred before; the draft model's greedy pick under
// the same bias) whose probability is neither 0 nor 1: where a wrong acceptance rule (resampling
// with the rejected draft left in) gives a draft p(2 - p) instead of p, these positions'
// chi-squares are far past the limit (checked with that rule).
void same_sampled_distribution(Served& plain, Served& spec) {
  const int x = 70, y = 71;
  std::mt19937 rng(5);
  json prompt = json::array();
  for (int i = 0; i < 64; ++i) prompt.push_back(rng() % 2 ? x : y);
  const int n = 400, len = 10;
  std::vector<std::map<std::string, int>> a(len), b(len);
  int64_t acc = 0, drafts = 0;
  for (int seed = 0; seed < n; ++seed) {
    const json body = {
        {"prompt", prompt},   {"max_tokens", len},
        {"temperature", 1.0}, {"seed", seed},
        {"logprobs", 0},      {"logit_bias", {{std::to_string(x), 60}, {std::to_string(y), 62.5}}}};
    const json r = plain.ask("/v1/completions", body), q = spec.ask("/v1/completions", body);
    const json &tr = r["choices"][0]["logprobs"]["tokens"],
               &tq = q["choices"][0]["logprobs"]["tokens"];
    for (int j = 0; j < len; ++j) {
      ++a[size_t(j)][j < int(tr.size()) ? tr[size_t(j)].dump() : "(end)"];
      ++b[size_t(j)][j < int(tq.size()) ? tq[size_t(j)].dump() : "(end)"];
    }
    acc += accepted(q);
    drafts += drafted(q);
  }
  EXPECT_GT(acc, 2 * n);           // the rule was exercised, and it also rejected:
  EXPECT_GT(drafts - acc, n / 2);  // neither always nor never
  // Position 0 comes from the prefill (no draft); 1..len-1 after drafts. One test per position,
  // each at about 1e-5.
  for (int j = 1; j < len; ++j) {
    const auto [chi2, df] = chi2_two_samples(a[size_t(j)], b[size_t(j)]);
    EXPECT_GE(df, 1) << "position " << j;  // both tokens seen
    EXPECT_LT(chi2, chi2_limit(df, 4.3)) << "position " << j << ", df " << df;
  }
}

}  // namespace

TEST(ServerSpec, GreedyOutputsAreTokenForTokenThoseOfPlainDecoding) {
  Served plain("none"), spec("ngram");
  (void)same_greedy_answers(plain, spec);
}

// The draft model: a model of other random weights (its drafts mostly rejected, rolled back in
// both pools) and the target as its own draft (accepted wherever no constraint differs).
TEST(ServerSpec, DraftModelGreedyOutputsAreTokenForTokenThoseOfPlainDecoding) {
  Served plain("none"), other("draft", -1, other_draft()), self("draft", -1, target_path());
  int64_t rejected = 0;
  for (const auto& [d, a] : same_greedy_answers(plain, other)) rejected += d - a;
  EXPECT_GT(rejected, 100);  // rolled back in both pools
  // The target's own greedy tokens, where no grammar or forced tool call masks its choice (the
  // three completions): accepted but for rounding ties between batch shapes.
  const auto each = same_greedy_answers(plain, self);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GT(each[i].first, 20) << i;
    EXPECT_GE(double(each[i].second), 0.9 * double(each[i].first)) << i;
  }
}

// A copying prompt: most of a greedy reply that repeats its context comes from accepted drafts.
TEST(ServerSpec, ACopyingPromptAcceptsDrafts) {
  Served plain("none"), spec("ngram");
  const json first = plain.ask(
      "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}});
  // The prompt, its greedy continuation, the prompt again: the continuation is there to copy.
  const std::string p =
      "Once upon a time" + first["choices"][0]["text"].get<std::string>() + " Once upon a time";
  const json body = {{"prompt", p}, {"max_tokens", 40}, {"temperature", 0}};
  const json got = spec.ask("/v1/completions", body);
  EXPECT_EQ(essentials(got), essentials(plain.ask("/v1/completions", body)));
  EXPECT_GT(drafted(got), 0);
  EXPECT_GE(accepted(got), 10) << got["usage"].dump();  // a quarter of the tokens
}

TEST(ServerSpec, SampledOutputsFollowPlainDecodingsDistribution) {
  Served plain("none", 0), spec("ngram", 0);
  same_sampled_distribution(plain, spec);
}

TEST(ServerSpec, DraftModelSampledOutputsFollowPlainDecodingsDistribution) {
  Served plain("none", 0), spec("draft", 0, other_draft());
  same_sampled_distribution(plain, spec);
}

// The KV of rejected drafts is rolled back: the reply kept for prefix reuse holds what it says,
// so the next turn (the prompt, the reply, more text) served from it says what a cold server
// computes.
TEST(ServerSpec, RollbackLeavesTheNextTurnsPrefixReuseExact) {
  Served cold("none", 0), warm("ngram");
  // No trailing space: the reply's first token is then the next turn's too.
  const std::string prompt =
      repeated("The quick brown fox jumps over the lazy dog near the river bank. ", 6) + "It";
  const json body = {{"prompt", prompt}, {"max_tokens", 64}, {"temperature", 0}};
  const json turn1 = warm.ask("/v1/completions", body);
  EXPECT_GT(drafted(turn1), accepted(turn1));  // some drafts were rejected: rolled back
  const json again = warm.ask("/v1/completions", body);
  EXPECT_EQ(essentials(again), essentials(turn1));
  json next = body;
  next["prompt"] = prompt + turn1["choices"][0]["text"].get<std::string>() +
                   " Then the fox ran home across the field.";
  const json turn2 = warm.ask("/v1/completions", next);
  // The reply's KV served too (past the prompt), not only the prompt's.
  EXPECT_GT(turn2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            turn1["usage"]["prompt_tokens"].get<int>() + 8);
  EXPECT_EQ(essentials(turn2), essentials(cold.ask("/v1/completions", next)));
}

// Several requests in flight at once (one with n = 2), each choice drafting on its own mirror
// sequence, their drafts made in one batch and checked in one target forward: each answer is
// plain decoding's, and the steps carried several sequences' rows.
TEST(ServerSpec, DraftModelWithSeveralRequestsInFlightAnswersAsPlainDecoding) {
  Served plain("none"), spec("draft", -1, other_draft());
  const std::string line = "The quick brown fox jumps over the lazy dog near the river bank. ";
  std::vector<json> bodies;
  for (int i = 0; i < 4; ++i)
    bodies.push_back({{"prompt", repeated(line, 1 + i) + std::to_string(i)},
                      {"max_tokens", 96},
                      {"temperature", 0},
                      {"n", i == 3 ? 2 : 1}});
  std::vector<json> want;
  for (const json& b : bodies) want.push_back(plain.ask("/v1/completions", b));
  std::vector<json> got(bodies.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < bodies.size(); ++i)
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", spec.server->port());
      c.set_read_timeout(60, 0);
      auto r = c.Post("/v1/completions", bodies[i].dump(), "application/json");
      if (r && r->status == 200) got[i] = json::parse(r->body);
    });
  for (std::thread& t : clients) t.join();
  int64_t all_drafted = 0;
  for (size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_EQ(essentials(got[i]), essentials(want[i])) << bodies[i].dump();
    if (!got[i].is_null()) all_drafted += drafted(got[i]);
  }
  EXPECT_GT(all_drafted, 200);
  auto m = spec.client->Get("/metrics");
  ASSERT_TRUE(m);
  const auto counter = [&](const std::string& name) {
    const size_t at = m->body.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + name.size() + 2));
  };
  const double rows = counter("kamera_decode_rows_total"),
               steps = counter("kamera_decode_steps_total");
  EXPECT_GT(rows, 2.0 * steps) << rows << " rows in " << steps << " steps";
}

// --spec draft needs --model-draft; -md with --spec ngram is a conflict; a draft of another
// vocabulary is refused at start, by name.
TEST(ServerSpec, DraftModelMisuseIsRefusedAtStart) {
  std::shared_ptr<const Model> model = tiny::load(target_path());
  const auto start_error = [&](ServerOptions o) {
    o.port = 0;
    o.threads = 1;
    Server s(model, o);
    const Status st = s.start();
    return st.ok() ? std::string("started") : st.message();
  };
  EXPECT_NE(start_error(options("draft")).find("--spec draft needs --model-draft"),
            std::string::npos);
  EXPECT_NE(start_error(options("ngram", -1, other_draft())).find("with --spec ngram"),
            std::string::npos);
  const std::string small = tiny::model_path("qwen2", DType::F32, kDims + ",vocab=812");
  const std::string e = start_error(options("draft", -1, small));
  EXPECT_NE(e.find("--model-draft " + small + ": its vocabulary is not the target's"),
            std::string::npos)
      << e;
  // -md alone turns the draft model on (as llama-server's).
  EXPECT_EQ(start_error(options("none", -1, other_draft())), "started");
}

namespace {

// Constrained requests whose grammars force runs of tokens: a JSON schema of enums and required
// keys (n choices), a forced tool call ("required", two tools of enum parameters, one call), a
// named function.
std::vector<json> constrained_requests(double temperature, int seed, int n) {
  const json schema = {{"type", "object"},
                       {"properties",
                        {{"role", {{"enum", {"admin", "editor", "viewer"}}}},
                         {"city", {{"enum", {"Paris", "Lyon", "Marseille"}}}},
                         {"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 99}}},
                         {"ok", {{"type", "boolean"}}}}},
                       {"required", {"role", "city", "n", "ok"}},
                       {"additionalProperties", false}};
  const json unit = {
      {"type", "function"},
      {"function",
       {{"name", "convert_temperature"},
        {"parameters",
         {{"type", "object"},
          {"properties",
           {{"unit", {{"enum", {"celsius", "fahrenheit"}}}}, {"round", {{"type", "boolean"}}}}},
          {"required", {"unit", "round"}},
          {"additionalProperties", false}}}}}};
  json weather = kWeather;
  weather["function"]["parameters"]["properties"]["city"] = {{"enum", {"Paris", "Lyon"}}};
  const json msgs = {{{"role", "user"}, {"content", "Weather in Paris, in celsius?"}}};
  const json base = {
      {"max_tokens", 64}, {"temperature", temperature}, {"seed", seed}, {"logprobs", true}};
  json a = base, b = base, c = base;
  a["messages"] = msgs;
  a["n"] = n;
  a["response_format"] = {{"type", "json_schema"},
                          {"json_schema", {{"name", "x"}, {"strict", true}, {"schema", schema}}}};
  b["messages"] = msgs;
  b["tools"] = {weather, unit};
  b["tool_choice"] = "required";
  b["parallel_tool_calls"] = false;
  c["messages"] = msgs;
  c["tools"] = {weather, unit};
  c["tool_choice"] = {{"type", "function"}, {"function", {{"name", "convert_temperature"}}}};
  return {a, b, c};
}

double metric(Served& s, const std::string& name) {
  auto m = s.client->Get("/metrics");
  EXPECT_TRUE(m);
  const size_t at = m ? m->body.find("\n" + name + " ") : std::string::npos;
  return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + name.size() + 2));
}

}  // namespace

// Forced drafting (--spec-forced on, with --spec none): the tokens a request's grammar leaves no
// choice for are drafted and every one is accepted; greedy answers are plain decoding's token for
// token; each accepted token is one decode step fewer (one choice a request); usage and /metrics
// count them. With
// --spec ngram the lookup continues after the forced run, the answers unchanged.
TEST(ServerSpec, ForcedDraftsAreAlwaysAcceptedAndSaveOneStepEach) {
  Served plain("none"), on("none", -1, "", "on"), ngram("ngram");
  int64_t all_forced = 0, all_tokens = 0;
  for (const json& body : constrained_requests(0, 0, 1)) {
    const json want = plain.ask("/v1/chat/completions", body);
    const json got = on.ask("/v1/chat/completions", body);
    EXPECT_EQ(essentials(got), essentials(want)) << body.dump();
    EXPECT_EQ(essentials(ngram.ask("/v1/chat/completions", body)), essentials(want));
    EXPECT_EQ(drafted(want), 0);
    EXPECT_EQ(drafted(got), forced(got));    // nothing else drafts
    EXPECT_EQ(accepted(got), drafted(got));  // a forced token is never rejected
    all_forced += forced(got);
    all_tokens += got["usage"]["completion_tokens"].get<int64_t>();
  }
  // Measured: 18 of 182 completion tokens on this synthetic vocabulary.
  EXPECT_GT(all_forced, all_tokens / 20) << all_tokens << " completion tokens";
  EXPECT_EQ(metric(on, "kamera_spec_forced_tokens_total"), double(all_forced));
  EXPECT_EQ(metric(plain, "kamera_decode_steps_total") - metric(on, "kamera_decode_steps_total"),
            double(all_forced));
}

// Seeded sampling: a step whose mask leaves one token draws one random number either way (plain
// sampling and the acceptance rule, which keeps the draft at once), so forced drafting leaves the
// seeded answers token for token those of plain decoding (a draft of a token that was not the
// only one allowed would change them).
TEST(ServerSpec, ForcedDraftsKeepSeededSampledAnswers) {
  Served plain("none"), on("none", -1, "", "on");
  int64_t all_forced = 0;
  for (int seed = 0; seed < 6; ++seed)
    for (const json& body : constrained_requests(0.7, seed, 2)) {
      const json got = on.ask("/v1/chat/completions", body);
      EXPECT_EQ(essentials(got), essentials(plain.ask("/v1/chat/completions", body)))
          << body.dump();
      EXPECT_EQ(accepted(got), drafted(got));
      all_forced += forced(got);
    }
  EXPECT_GT(all_forced, 50);
}
