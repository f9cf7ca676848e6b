// POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API) on a synthetic model
// served with Qwen3's real chat template: system strings and text blocks, content blocks and a
// tool loop's tool_use / tool_result blocks give the same prompt as the chat request they
// translate to (the reference: /v1/chat/completions' usage.prompt_tokens and its greedy answer);
// count_tokens counts what the message's usage.input_tokens reports; the stream's events
// assemble to the same Message as the whole body (message_start already tells the prompt's
// usage); a forced tool comes back as a tool_use block whose input round-trips; a stop sequence
// the greedy answer holds ends it as stop_sequence; turn 2 reports turn 1 as
// cache_read_input_tokens; a prompt that opens <think> answers in a thinking block; fields kamera
// does not do are refused by name, in Anthropic's error shape; x-api-key is taken as the API key.
#include <gtest/gtest.h>

#include "support/chat_templates.h"
#include "support/test_server.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

const auto fixture = tiny::template_fixture;

struct Served : tiny::TestServer {
  explicit Served(const std::string& tmpl = fixture("qwen3"), std::vector<std::string> keys = {})
      : TestServer(options(tmpl, std::move(keys)),
                   tiny::model_path("qwen2", DType::F32, "ctx=4096")) {}
  static ServerOptions options(const std::string& tmpl, std::vector<std::string> keys) {
    ServerOptions o;
    o.chat_template = tmpl;
    o.api_keys = std::move(keys);
    return o;
  }
  // The events of an SSE stream: (event name, data).
  std::vector<std::pair<std::string, json>> events(json b) {
    b["stream"] = true;
    auto r = client->Post("/v1/messages", b.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    std::vector<std::pair<std::string, json>> out;
    for (size_t at = 0; r && (at = r->body.find("event: ", at)) != std::string::npos;) {
      const size_t nl = r->body.find('\n', at), end = r->body.find("\n\n", at);
      const std::string name = r->body.substr(at + 7, nl - at - 7);
      EXPECT_EQ(r->body.substr(nl + 1, 6), "data: ");
      out.push_back({name, json::parse(r->body.substr(nl + 7, end - nl - 7))});
      at = end;
    }
    return out;
  }
};

const json kNoEnd = {{"1", -100}, {"2", -100}};  // the tiny vocabulary's BOS and EOS

json messages(json extra) {
  json b = {{"model", "m"}, {"max_tokens", 12}, {"logit_bias", kNoEnd}};
  b.update(extra);
  return b;
}

json chat(json msgs) {
  return {{"messages", msgs}, {"max_tokens", 12}, {"logit_bias", kNoEnd}};
}

json post_ok(Served& s, const std::string& path, const json& body) {
  int st = 0;
  json r = s.post(path, body, &st);
  EXPECT_EQ(st, 200) << body.dump() << " -> " << r.dump();
  return r;
}

// The text of a Message's text blocks.
std::string text_of(const json& m) {
  std::string t;
  for (const json& b : m["content"])
    if (b["type"] == "text") t += b["text"].get<std::string>();
  return t;
}

const json kSchema = {{"type", "object"},
                      {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "integer"}}}}},
                      {"required", {"a", "b"}},
                      {"additionalProperties", false}};
const json kAdd = {
    {"name", "add"}, {"description", "Adds two integers"}, {"input_schema", kSchema}};
const json kChatAdd = {
    {"type", "function"},
    {"function", {{"name", "add"}, {"description", "Adds two integers"}, {"parameters", kSchema}}}};

}  // namespace

// The prompt's tokens as Anthropic's usage counts them: those not read from the cache, plus those
// written to it, plus those read from it.
int64_t prompt_of(const json& usage) {
  return usage["input_tokens"].get<int64_t>() +
         usage["cache_creation_input_tokens"].get<int64_t>() +
         usage["cache_read_input_tokens"].get<int64_t>();
}

TEST(ServerMessages, RequestsGiveTheChatRequestTheyTranslateTo) {
  Served s;
  const json c = post_ok(s, "/v1/chat/completions",
                         chat({{{"role", "system"}, {"content", "Be brief."}},
                               {{"role", "user"}, {"content", "What is 2 + 2?"}}}));
  const json as_string = {{"system", "Be brief."},
                          {"messages", {{{"role", "user"}, {"content", "What is 2 + 2?"}}}}};
  const json as_blocks = {{"system", {{{"type", "text"}, {"text", "Be brief."}}}},
                          {"messages",
                           {{{"role", "user"},
                             {"content",
                              {{{"type", "text"},
                                {"text", "What is 2 + 2?"},
                                {"cache_control", {{"type", "ephemeral"}}}}}}}}}};
  for (const json& body : {as_string, as_blocks}) {
    const json m = post_ok(s, "/v1/messages", messages(body));
    EXPECT_EQ(m["type"], "message");
    EXPECT_EQ(m["role"], "assistant");
    EXPECT_TRUE(m["id"].get<std::string>().starts_with("msg_"));
    EXPECT_EQ(m["stop_reason"], "max_tokens");
    EXPECT_EQ(prompt_of(m["usage"]), c["usage"]["prompt_tokens"]);
    EXPECT_EQ(m["usage"]["output_tokens"], 12);
    EXPECT_EQ(m["usage"]["cache_creation_input_tokens"], 0);
    EXPECT_EQ(text_of(m), c["choices"][0]["message"]["content"]);
    json count = body;
    count["model"] = "m";
    const json n = post_ok(s, "/v1/messages/count_tokens", count);
    EXPECT_EQ(n, json({{"input_tokens", c["usage"]["prompt_tokens"]}}));
  }
}

TEST(ServerMessages, AToolLoopsBlocksGiveTheChatRequestAndCountTokensAgrees) {
  Served s;
  const json msgs = {
      {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Add 2 and 2."}}}}},
      {{"role", "assistant"},
       {"content",
        {{{"type", "text"}, {"text", "I will add them."}},
         {{"type", "tool_use"}, {"id", "c1"}, {"name", "add"}, {"input", {{"a", 2}, {"b", 2}}}}}}},
      {{"role", "user"},
       {"content",
        {{{"type", "tool_result"}, {"tool_use_id", "c1"}, {"content", "4"}},
         {{"type", "text"}, {"text", "Thanks."}}}}}};
  const json m =
      post_ok(s, "/v1/messages", messages({{"messages", msgs}, {"tools", json::array({kAdd})}}));
  json c = chat({{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Add 2 and 2."}}}}},
                 {{"role", "assistant"},
                  {"content", "I will add them."},
                  {"tool_calls",
                   {{{"id", "c1"},
                     {"type", "function"},
                     {"function", {{"name", "add"}, {"arguments", "{\"a\":2,\"b\":2}"}}}}}}},
                 {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "4"}},
                 {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Thanks."}}}}}});
  c["tools"] = json::array({kChatAdd});
  const json cr = post_ok(s, "/v1/chat/completions", c);
  EXPECT_EQ(prompt_of(m["usage"]), cr["usage"]["prompt_tokens"]);
  EXPECT_EQ(text_of(m), cr["choices"][0]["message"]["content"]);
  const json n = post_ok(s, "/v1/messages/count_tokens",
                         {{"model", "m"}, {"messages", msgs}, {"tools", json::array({kAdd})}});
  EXPECT_EQ(n["input_tokens"], prompt_of(m["usage"]));
}

TEST(ServerMessages, TheStreamAssemblesToTheWholeMessage) {
  Served s;
  const json body = messages({{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}}});
  const json whole = post_ok(s, "/v1/messages", body);
  const auto ev = s.events(body);
  ASSERT_GE(ev.size(), 6u);
  EXPECT_EQ(ev[0].first, "message_start");
  EXPECT_EQ(ev[0].second["message"]["id"].get<std::string>().substr(0, 4), "msg_");
  EXPECT_EQ(ev[1].first, "content_block_start");
  EXPECT_EQ(ev[1].second["content_block"]["type"], "text");
  EXPECT_EQ(ev[ev.size() - 3].first, "content_block_stop");
  EXPECT_EQ(ev[ev.size() - 2].first, "message_delta");
  EXPECT_EQ(ev.back().first, "message_stop");
  std::string text;
  for (const auto& [name, data] : ev) {
    EXPECT_EQ(data["type"], name);
    if (name == "content_block_delta") {
      EXPECT_EQ(data["delta"]["type"], "text_delta");
      text += data["delta"]["text"];
    }
  }
  EXPECT_EQ(text, text_of(whole));
  const json& d = ev[ev.size() - 2].second;
  EXPECT_EQ(d["delta"]["stop_reason"], "max_tokens");
  EXPECT_EQ(d["usage"]["output_tokens"], whole["usage"]["output_tokens"]);
  EXPECT_EQ(prompt_of(d["usage"]), prompt_of(whole["usage"]));
  // message_start tells the prompt's usage already (the same body again: read from the cache)
  const json& told = ev[0].second["message"]["usage"];
  EXPECT_EQ(prompt_of(told), prompt_of(whole["usage"])) << told.dump();
  EXPECT_EQ(told["input_tokens"], d["usage"]["input_tokens"]) << told.dump();
  EXPECT_EQ(told["cache_read_input_tokens"], d["usage"]["cache_read_input_tokens"]) << told.dump();
  EXPECT_GT(told["cache_read_input_tokens"].get<int64_t>(), 0) << told.dump();
}

TEST(ServerMessages, AForcedToolIsAToolUseBlockWhoseInputRoundTrips) {
  Served s;
  const json body = messages(
      {{"messages", {{{"role", "user"}, {"content", "Add 2 and 3."}}}},
       {"tools", json::array({kAdd})},
       {"tool_choice", {{"type", "tool"}, {"name", "add"}, {"disable_parallel_tool_use", true}}},
       {"max_tokens", 200},
       {"temperature", 0.7},
       {"seed", 4}});
  const json m = post_ok(s, "/v1/messages", body);
  ASSERT_EQ(m["content"].size(), 1u) << m.dump();
  const json& use = m["content"][0];
  EXPECT_EQ(use["type"], "tool_use");
  EXPECT_EQ(use["name"], "add");
  EXPECT_TRUE(use["id"].get<std::string>().starts_with("toolu_"));
  EXPECT_TRUE(use["input"]["a"].is_number_integer() && use["input"]["b"].is_number_integer())
      << use;
  EXPECT_EQ(m["stop_reason"], "tool_use");

  std::string streamed;
  for (const auto& [name, data] : s.events(body)) {
    if (name == "content_block_start") {
      EXPECT_EQ(data["content_block"]["type"], "tool_use");
    }
    if (name == "content_block_delta") streamed += data["delta"]["partial_json"];
    if (name == "message_delta") {
      EXPECT_EQ(data["delta"]["stop_reason"], "tool_use");
    }
  }
  EXPECT_EQ(json::parse(streamed), use["input"]);

  // the round trip: the block sent back with its result is the next turn's history
  json next = body;
  next.erase("tool_choice");
  next["max_tokens"] = 12;
  next["messages"].push_back({{"role", "assistant"}, {"content", m["content"]}});
  next["messages"].push_back(
      {{"role", "user"},
       {"content", {{{"type", "tool_result"}, {"tool_use_id", use["id"]}, {"content", "5"}}}}});
  const json m2 = post_ok(s, "/v1/messages", next);
  EXPECT_GT(m2["usage"]["cache_read_input_tokens"].get<int64_t>(), prompt_of(m["usage"]) - 2)
      << m2["usage"];
}

TEST(ServerMessages, AStopSequenceTheAnswerHoldsEndsItAsStopSequence) {
  Served s;
  const json body = messages({{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}}});
  const std::string full = text_of(post_ok(s, "/v1/messages", body));
  ASSERT_GE(full.size(), 8u);
  const std::string stop = full.substr(full.size() / 2, 2);
  json b = body;
  b["stop_sequences"] = {"never-in-it", stop};
  const json m = post_ok(s, "/v1/messages", b);
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], stop);
  EXPECT_EQ(text_of(m), full.substr(0, full.find(stop)));
  const json plain = post_ok(s, "/v1/messages", body);
  EXPECT_EQ(plain["stop_sequence"], nullptr);
}

TEST(ServerMessages, TurnTwoReportsTurnOneAsCacheReadInputTokens) {
  Served s;
  json msgs = {{{"role", "user"}, {"content", "Tell me a story about a dog and a red ball."}}};
  const json t1 = post_ok(s, "/v1/messages", messages({{"messages", msgs}}));
  msgs.push_back({{"role", "assistant"}, {"content", t1["content"]}});
  msgs.push_back({{"role", "user"}, {"content", "And then?"}});
  const json t2 = post_ok(s, "/v1/messages", messages({{"messages", msgs}}));
  const int64_t cached = t2["usage"]["cache_read_input_tokens"];
  EXPECT_GE(cached, prompt_of(t1["usage"]) - 2) << t2["usage"].dump();
  EXPECT_LT(cached, prompt_of(t2["usage"]));
  // the tokens the cache did not serve are input_tokens (Anthropic's accounting: not the prompt)
  EXPECT_EQ(t2["usage"]["input_tokens"].get<int64_t>(), prompt_of(t2["usage"]) - cached);
}

TEST(ServerMessages, APromptThatOpensThinkAnswersInAThinkingBlock) {
  Served s(tiny::thinking_template());
  const json body = messages({{"messages", {{{"role", "user"}, {"content", "What is 2 + 2?"}}}}});
  const json m = post_ok(s, "/v1/messages", body);
  ASSERT_EQ(m["content"].size(), 1u) << m.dump();
  EXPECT_EQ(m["content"][0]["type"], "thinking");
  EXPECT_FALSE(m["content"][0]["thinking"].get<std::string>().empty());
  std::string thinking;
  for (const auto& [name, data] : s.events(body))
    if (name == "content_block_delta" && data["delta"]["type"] == "thinking_delta")
      thinking += data["delta"]["thinking"];
  EXPECT_EQ(thinking, m["content"][0]["thinking"]);
  // thinking disabled: the template's switch, as chat's reasoning_effort none sets it
  json off = body;
  off["thinking"] = {{"type", "disabled"}};
  const json mo = post_ok(s, "/v1/messages", off);
  json c = chat(body["messages"]);
  c["reasoning_effort"] = "none";
  const json co = post_ok(s, "/v1/chat/completions", c);
  EXPECT_EQ(prompt_of(mo["usage"]), co["usage"]["prompt_tokens"]);
  EXPECT_NE(prompt_of(mo["usage"]), prompt_of(m["usage"]));
}

// The SDK's messages.parse({output_config: {format: zodOutputFormat(...)}}) (tests/frameworks):
// the answer's text is JSON of the schema; what kamera does not do in output_config is refused by
// name.
TEST(ServerMessages, OutputConfigFormatConstrainsTheAnswerToItsSchema) {
  Served s;
  json body =
      messages({{"messages", {{{"role", "user"}, {"content", "Add 2 and 3 as JSON."}}}},
                {"max_tokens", 200},
                {"temperature", 0.7},
                {"seed", 4},
                {"output_config", {{"format", {{"type", "json_schema"}, {"schema", kSchema}}}}}});
  body.erase("logit_bias");
  for (const int seed : {4, 5, 6}) {
    body["seed"] = seed;
    const json m = post_ok(s, "/v1/messages", body);
    EXPECT_EQ(m["stop_reason"], "end_turn") << m.dump();
    const json doc = json::parse(text_of(m));
    ASSERT_TRUE(doc.is_object()) << doc;
    EXPECT_EQ(doc.size(), 2u) << doc;
    EXPECT_TRUE(doc["a"].is_number_integer() && doc["b"].is_number_integer()) << doc;
  }
  auto refused = [&](json config, const std::string& param) {
    json b = body;
    b["output_config"] = std::move(config);
    int st = 0;
    const json r = s.post("/v1/messages", b, &st);
    EXPECT_EQ(st, 400) << r.dump();
    EXPECT_EQ(r["error"]["param"], param) << r.dump();
  };
  refused({{"effort", "high"}}, "output_config.effort");
  refused({{"format", {{"type", "json_object"}}}}, "output_config.format.type");
  refused({{"format", {{"type", "json_schema"}}}}, "output_config.format.schema");
  refused(
      {{"format", {{"type", "json_schema"}, {"schema", {{"type", "string"}, {"pattern", "^x"}}}}}},
      "output_config.format.schema");
}

TEST(ServerMessages, FieldsKameraDoesNotDoAreRefusedByNameInAnthropicsShape) {
  Served s;
  const json hi = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  auto refused = [&](const json& body, const std::string& param,
                     const std::string& path = "/v1/messages") {
    int st = 0;
    const json r = s.post(path, body, &st);
    EXPECT_EQ(st, 400) << body.dump() << " -> " << r.dump();
    EXPECT_EQ(r["type"], "error") << r.dump();
    EXPECT_EQ(r["error"]["type"], "invalid_request_error") << r.dump();
    EXPECT_EQ(r["error"]["param"], param) << r.dump();
    EXPECT_NE(r["error"]["message"].get<std::string>().find(param), std::string::npos) << r;
  };
  auto with = [&](json extra) {
    json b = messages(hi);
    b.update(extra);
    return b;
  };
  json no_max = messages(hi);
  no_max.erase("max_tokens");
  refused(no_max, "max_tokens");
  refused(with({{"frobnicate", 1}}), "frobnicate");
  refused(with({{"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}}),
          "tools[0].type");
  refused(with({{"messages", {{{"role", "system"}, {"content", "x"}}}}}), "messages[0].role");
  refused(with({{"messages",
                 {{{"role", "user"},
                   {"content", {{{"type", "image"}, {"source", {{"type", "file"}}}}}}}}}}),
          "messages[0].content[0].source.type");
  refused(with({{"thinking", {{"type", "enabled"}, {"budget_tokens", 100}}}}),
          "thinking.budget_tokens");
  refused(with({{"tool_choice", {{"type", "sometimes"}}}}), "tool_choice");
  refused(with({{"stop_sequences", "x"}}), "stop_sequences");
  refused(with({{"max_tokens", 0}}), "max_tokens");
  refused({{"model", "m"}, {"messages", json::array()}}, "messages", "/v1/messages/count_tokens");
  post_ok(s, "/v1/messages", with({{"metadata", {{"user_id", "u1"}}}, {"top_k", 5}}));
  // service_tier as the SDK sends it: auto and standard_only are kamera's one tier.
  post_ok(s, "/v1/messages", with({{"service_tier", "auto"}}));
  post_ok(s, "/v1/messages", with({{"service_tier", "standard_only"}}));
  refused(with({{"service_tier", "priority"}}), "service_tier");

  int st = 0;
  const json nf = s.post("/v1/messages/nope", json::object(), &st);
  EXPECT_EQ(st, 404);
  EXPECT_EQ(nf["type"], "error");
  EXPECT_EQ(nf["error"]["type"], "not_found_error");
  EXPECT_NE(nf["error"]["message"].get<std::string>().find("/v1/messages"), std::string::npos);
}

TEST(ServerMessages, TheAPIKeyIsTakenFromXApiKey) {
  Served s(fixture("qwen3"), {"key-a-0123456789"});
  const json body = messages({{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  auto post = [&](const httplib::Headers& h) {
    return s.client->Post("/v1/messages", h, body.dump(), "application/json");
  };
  auto none = post({});
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["error"]["type"], "authentication_error") << none->body;
  auto wrong = post({{"x-api-key", "key-b-0123456789"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto right = post({{"x-api-key", "key-a-0123456789"}, {"anthropic-version", "2023-06-01"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200) << right->body;
  auto bearer = post({{"Authorization", "Bearer key-a-0123456789"}});
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 200) << bearer->body;
}
