// POST /v1/responses (OpenAI's Responses API) on a synthetic model served with Qwen3's real chat
// template: a string input and item inputs (messages, function_call, function_call_output) give
// the same prompt as the chat request they translate to (the reference: /v1/chat/completions'
// usage.prompt_tokens and its greedy answer); the stream's event sequence assembles to the same
// Response as the whole body; a forced function call comes back as a function_call item; turn 2
// of a conversation reports its first turn in input_tokens_details.cached_tokens; a prompt that
// opens <think> answers in a reasoning item; fields kamera does not do are refused by name; a 404
// names the endpoints served. Stored responses: previous_response_id continues one (the same
// prompt as the conversation sent whole, turn 1 read from the cache); GET and DELETE
// /v1/responses/{id}; an id not stored (deleted, store: false, another key's, evicted past
// --responses-store-mb) is refused naming it.
#include <gtest/gtest.h>

#include "support/chat_templates.h"
#include "support/test_server.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

const auto fixture = tiny::template_fixture;

struct Served : tiny::TestServer {
  explicit Served(const std::string& tmpl = fixture("qwen3"))
      : TestServer(options(tmpl), tiny::model_path("qwen2", DType::F32, "ctx=4096")) {}
  static ServerOptions options(const std::string& tmpl) {
    ServerOptions o;
    o.chat_template = tmpl;
    return o;
  }
  // The events of an SSE stream: (event name, data).
  std::vector<std::pair<std::string, json>> events(json b) {
    b["stream"] = true;
    auto r = client->Post("/v1/responses", b.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    std::vector<std::pair<std::string, json>> out;
    for (size_t at = 0; r && (at = r->body.find("event: ", at)) != std::string::npos;) {
      const size_t nl = r->body.find('\n', at), end = r->body.find("\n\n", at);
      const std::string name = r->body.substr(at + 7, nl - at - 7);
      const std::string data = r->body.substr(nl + 7, end - nl - 7);  // after "data: "
      out.push_back({name, json::parse(data)});
      at = end;
    }
    return out;
  }
};

const json kNoEnd = {{"1", -100}, {"2", -100}};  // the tiny vocabulary's BOS and EOS

json responses(json extra) {
  json b = {{"model", "m"}, {"max_output_tokens", 12}, {"logit_bias", kNoEnd}};
  b.update(extra);
  return b;
}

json chat(json messages) {
  return {{"messages", messages}, {"max_tokens", 12}, {"logit_bias", kNoEnd}};
}

json post_ok(tiny::TestServer& s, const std::string& path, const json& body) {
  int st = 0;
  json r = s.post(path, body, &st);
  EXPECT_EQ(st, 200) << body.dump() << " -> " << r.dump();
  return r;
}

// The text of a Response's message items.
std::string output_text(const json& r) {
  std::string t;
  for (const json& item : r["output"])
    if (item["type"] == "message")
      for (const json& c : item["content"]) t += c["text"].get<std::string>();
  return t;
}

const json kAdd = {{"type", "function"},
                   {"name", "add"},
                   {"description", "Adds two integers"},
                   {"parameters",
                    {{"type", "object"},
                     {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "integer"}}}}},
                     {"required", {"a", "b"}},
                     {"additionalProperties", false}}}};

}  // namespace

TEST(ServerResponses, InputsGiveTheChatRequestTheyTranslateTo) {
  Served s;
  const json r = post_ok(s, "/v1/responses",
                         responses({{"instructions", "Be brief."}, {"input", "What is 2 + 2?"}}));
  const json c = post_ok(s, "/v1/chat/completions",
                         chat({{{"role", "system"}, {"content", "Be brief."}},
                               {{"role", "user"}, {"content", "What is 2 + 2?"}}}));
  EXPECT_EQ(r["object"], "response");
  EXPECT_TRUE(r["id"].get<std::string>().starts_with("resp_"));
  EXPECT_EQ(r["status"], "incomplete");  // cut at max_output_tokens
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["usage"]["input_tokens"], c["usage"]["prompt_tokens"]);
  EXPECT_EQ(r["usage"]["output_tokens"], 12);
  EXPECT_EQ(output_text(r), c["choices"][0]["message"]["content"]);

  // items: a tool loop's history, as the Responses API sends it back
  const json items = {
      {{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "Add 2 and 2."}}}}},
      {{"type", "function_call"},
       {"call_id", "c1"},
       {"name", "add"},
       {"arguments", "{\"a\": 2, \"b\": 2}"}},
      {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "4"}}};
  const json ri =
      post_ok(s, "/v1/responses", responses({{"input", items}, {"tools", json::array({kAdd})}}));
  const json tool = {{"type", "function"},
                     {"function",
                      {{"name", "add"},
                       {"description", kAdd["description"]},
                       {"parameters", kAdd["parameters"]}}}};
  const json ci = post_ok(s, "/v1/chat/completions", [&] {
    json b = chat({{{"role", "user"}, {"content", "Add 2 and 2."}},
                   {{"role", "assistant"},
                    {"content", nullptr},
                    {"tool_calls",
                     {{{"id", "c1"},
                       {"type", "function"},
                       {"function", {{"name", "add"}, {"arguments", "{\"a\": 2, \"b\": 2}"}}}}}}},
                   {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "4"}}});
    b["tools"] = json::array({tool});
    return b;
  }());
  EXPECT_EQ(ri["usage"]["input_tokens"], ci["usage"]["prompt_tokens"]);
  EXPECT_EQ(output_text(ri), ci["choices"][0]["message"]["content"]);
}

TEST(ServerResponses, TheStreamAssemblesToTheWholeResponse) {
  Served s;
  const json body = responses({{"input", "Tell me a story."}});
  const json whole = post_ok(s, "/v1/responses", body);
  const auto ev = s.events(body);
  ASSERT_GE(ev.size(), 6u);
  EXPECT_EQ(ev[0].first, "response.created");
  EXPECT_EQ(ev[1].first, "response.in_progress");
  EXPECT_EQ(ev[2].first, "response.output_item.added");
  EXPECT_EQ(ev[3].first, "response.content_part.added");
  EXPECT_EQ(ev.back().first, "response.incomplete");
  std::string text;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].second["type"], ev[i].first);
    EXPECT_EQ(ev[i].second["sequence_number"], int(i));
    if (ev[i].first == "response.output_text.delta") text += ev[i].second["delta"];
  }
  EXPECT_EQ(text, output_text(whole));
  const json& last = ev.back().second["response"];
  EXPECT_EQ(output_text(last), output_text(whole));
  EXPECT_EQ(last["usage"]["output_tokens"], whole["usage"]["output_tokens"]);
}

TEST(ServerResponses, AForcedCallIsAFunctionCallItemStreamedOrNot) {
  Served s;
  const json body = responses({{"input", "Add 2 and 3."},
                               {"tools", json::array({kAdd})},
                               {"tool_choice", "required"},
                               {"parallel_tool_calls", false},
                               {"max_output_tokens", 200},
                               {"temperature", 0.7},
                               {"seed", 4}});
  const json r = post_ok(s, "/v1/responses", body);
  ASSERT_EQ(r["output"].size(), 1u) << r.dump();
  const json& call = r["output"][0];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "add");
  EXPECT_EQ(call["status"], "completed");
  const json args = json::parse(call["arguments"].get<std::string>());
  EXPECT_TRUE(args["a"].is_number_integer() && args["b"].is_number_integer()) << args;
  EXPECT_EQ(r["status"], "completed");

  std::string streamed;
  std::vector<std::string> names;
  for (const auto& [name, data] : s.events(body)) {
    names.push_back(name);
    if (name == "response.function_call_arguments.delta") streamed += data["delta"];
    if (name == "response.function_call_arguments.done") {
      EXPECT_EQ(data["arguments"], call["arguments"]);
    }
  }
  EXPECT_EQ(streamed, call["arguments"]);
  EXPECT_EQ(names.back(), "response.completed");

  // the same call cut by max_output_tokens: the response and its item are incomplete
  json cut = body;
  cut["max_output_tokens"] =
      r["usage"]["output_tokens"].get<int64_t>() - 2;  // inside the arguments
  const json c = post_ok(s, "/v1/responses", cut);
  EXPECT_EQ(c["status"], "incomplete") << c.dump();
  ASSERT_FALSE(c["output"].empty()) << c.dump();
  EXPECT_EQ(c["output"].back()["status"], "incomplete") << c.dump();
}

// @openai/agents asks again when a Response has neither a message nor a call (tests/frameworks):
// an answer that ends at once is a message with empty text, streamed or not.
TEST(ServerResponses, AnEmptyAnswerIsAMessageWithEmptyText) {
  Served s;
  const json body = responses({{"input", "Hi"}, {"logit_bias", {{"2", 100}}}});  // EOS at once
  const json r = post_ok(s, "/v1/responses", body);
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["usage"]["output_tokens"], 0);
  ASSERT_EQ(r["output"].size(), 1u) << r.dump();
  EXPECT_EQ(r["output"][0]["type"], "message");
  EXPECT_EQ(r["output"][0]["status"], "completed");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "");
  std::vector<std::string> names;
  for (const auto& [name, data] : s.events(body)) {
    names.push_back(name);
    if (name == "response.completed") {
      const json& item = data["response"]["output"].at(0);
      EXPECT_EQ(item["type"], "message");
      EXPECT_EQ(item["content"], r["output"][0]["content"]);
    }
  }
  const std::vector<std::string> want = {
      "response.created",           "response.in_progress",
      "response.output_item.added", "response.content_part.added",
      "response.output_text.done",  "response.content_part.done",
      "response.output_item.done",  "response.completed"};
  EXPECT_EQ(names, want);
}

TEST(ServerResponses, TurnTwoReportsTurnOneAsCachedTokens) {
  Served s;
  json input = {{{"role", "user"}, {"content", "Tell me a story about a dog and a red ball."}}};
  const json t1 = post_ok(s, "/v1/responses", responses({{"input", input}}));
  input.push_back(
      {{"role", "assistant"}, {"content", {{{"type", "output_text"}, {"text", output_text(t1)}}}}});
  input.push_back({{"role", "user"}, {"content", "And then?"}});
  const json t2 = post_ok(s, "/v1/responses", responses({{"input", input}}));
  const int64_t cached = t2["usage"]["input_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, t1["usage"]["input_tokens"].get<int64_t>() - 2) << t2["usage"].dump();
  EXPECT_LT(cached, t2["usage"]["input_tokens"].get<int64_t>());
}

TEST(ServerResponses, APromptThatOpensThinkAnswersInAReasoningItem) {
  const std::string path = tiny::thinking_template();
  Served s(path);
  const json r = post_ok(s, "/v1/responses", responses({{"input", "What is 2 + 2?"}}));
  ASSERT_EQ(r["output"].size(), 1u) << r.dump();
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_FALSE(r["output"][0]["content"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(output_text(r), "");
  std::string reasoning;
  for (const auto& [name, data] : s.events(responses({{"input", "What is 2 + 2?"}})))
    if (name == "response.reasoning_text.delta") reasoning += data["delta"];
  EXPECT_EQ(reasoning, r["output"][0]["content"][0]["text"]);
}

TEST(ServerResponses, FieldsKameraDoesNotDoAreRefusedByName) {
  Served s;
  auto refused = [&](const json& extra, const std::string& param) {
    int st = 0;
    const json r = s.post("/v1/responses", responses(extra), &st);
    EXPECT_EQ(st, 400) << extra.dump() << " -> " << r.dump();
    EXPECT_EQ(r["error"]["param"], param) << r.dump();
  };
  const json in = {{"input", "hi"}};
  auto with = [&](json extra) {
    json b = in;
    b.update(extra);
    return b;
  };
  refused(with({{"previous_response_id", "resp_1"}}), "previous_response_id");  // not stored
  refused(with({{"store", "yes"}}), "store");
  refused(with({{"conversation", "conv_1"}}), "conversation");
  refused(with({{"tools", {{{"type", "web_search"}}}}}), "tools[0].type");
  refused(with({{"truncation", "auto"}}), "truncation");
  refused(with({{"frobnicate", 1}}), "frobnicate");
  refused(with({{"max_output_tokens", 0}}), "max_output_tokens");
  refused(with({{"text",
                 {{"format",
                   {{"type", "json_schema"},
                    {"name", "x"},
                    {"schema", {{"type", "string"}, {"pattern", "^a"}}}}}}}}),
          "text.format.schema");
  refused({{"input", {{{"type", "item_reference"}, {"id", "msg_x"}}}}}, "input[0].id");  // none
  refused({{"input", {{{"type", "item_reference"}, {"id", 3}}}}}, "input[0].id");
  refused({{"input", json::array()}}, "input");
  post_ok(s, "/v1/responses", responses(with({{"store", false}, {"truncation", "disabled"}})));

  int st = 0;
  const json nf = s.post("/v1/messages/nope", json::object(), &st);
  EXPECT_EQ(st, 404);
  EXPECT_NE(nf["error"]["message"].get<std::string>().find("/v1/responses"), std::string::npos)
      << nf.dump();
}

// previous_response_id: the stored response's input and output items come first, so turn 2 is the
// prompt of the same conversation sent whole (the reference: its usage.input_tokens and greedy
// answer) and extends turn 1's prompt and reply: cached_tokens covers both.
TEST(ServerResponses, APreviousResponseIdContinuesTheStoredConversation) {
  Served s;
  const std::string first = "Tell me a story about a dog and a red ball.";
  const json t1 =
      post_ok(s, "/v1/responses", responses({{"instructions", "Be brief."}, {"input", first}}));
  EXPECT_EQ(t1["store"], true);
  const json t2 = post_ok(s, "/v1/responses",
                          responses({{"instructions", "Be brief."},
                                     {"previous_response_id", t1["id"]},
                                     {"input", "And then?"}}));
  EXPECT_EQ(t2["previous_response_id"], t1["id"]);
  const int64_t t1_tokens = t1["usage"]["total_tokens"];
  const int64_t cached = t2["usage"]["input_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, t1_tokens - 2) << t1["usage"].dump() << " then " << t2["usage"].dump();
  EXPECT_LT(cached, t2["usage"]["input_tokens"].get<int64_t>());
  std::printf("turn 2 by previous_response_id: %lld of %lld input tokens cached (turn 1: %lld)\n",
              static_cast<long long>(cached),
              static_cast<long long>(t2["usage"]["input_tokens"].get<int64_t>()),
              static_cast<long long>(t1_tokens));

  const json whole = {
      {{"role", "user"}, {"content", first}},
      {{"role", "assistant"}, {"content", {{{"type", "output_text"}, {"text", output_text(t1)}}}}},
      {{"role", "user"}, {"content", "And then?"}}};
  const json ref =
      post_ok(s, "/v1/responses",
              responses({{"instructions", "Be brief."}, {"input", whole}, {"store", false}}));
  EXPECT_EQ(t2["usage"]["input_tokens"], ref["usage"]["input_tokens"]);
  EXPECT_EQ(output_text(t2), output_text(ref));

  // a third turn, streamed, continues the second (two stored responses chained)
  const auto ev = s.events(responses(
      {{"instructions", "Be brief."}, {"previous_response_id", t2["id"]}, {"input", "Why?"}}));
  ASSERT_FALSE(ev.empty());
  const json& t3 = ev.back().second["response"];
  EXPECT_GE(t3["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(),
            t2["usage"]["total_tokens"].get<int64_t>() - 2)
      << t3["usage"].dump();
  EXPECT_EQ(post_ok(s, "/v1/responses",
                    responses({{"previous_response_id", t3["id"]},
                               {"input", "Ok."}}))["previous_response_id"],
            t3["id"]);
}

// item_reference (what @ai-sdk/openai sends for its earlier replies with store on, its default):
// the stored output item it names takes its place, so the turn is the conversation sent whole
// (the reference: its input_tokens and greedy answer) and turn 1 is served from the cache.
TEST(ServerResponses, AnItemReferenceIsTheStoredItemItNames) {
  Served s;
  const std::string first = "Tell me a story about a dog and a red ball.";
  const json t1 = post_ok(s, "/v1/responses", responses({{"input", first}}));
  ASSERT_EQ(t1["output"].size(), 1u) << t1.dump();
  const json msg = t1["output"][0];
  ASSERT_TRUE(msg["id"].is_string()) << msg.dump();
  const json by_ref = {{{"role", "user"}, {"content", first}},
                       {{"type", "item_reference"}, {"id", msg["id"]}},
                       {{"role", "user"}, {"content", "And then?"}}};
  // store: false, so that after t1 is deleted no stored response holds the item
  const json t2 = post_ok(s, "/v1/responses", responses({{"input", by_ref}, {"store", false}}));
  const json whole = {
      {{"role", "user"}, {"content", first}},
      {{"role", "assistant"}, {"content", {{{"type", "output_text"}, {"text", output_text(t1)}}}}},
      {{"role", "user"}, {"content", "And then?"}}};
  const json ref = post_ok(s, "/v1/responses", responses({{"input", whole}, {"store", false}}));
  EXPECT_EQ(t2["usage"]["input_tokens"], ref["usage"]["input_tokens"]);
  EXPECT_EQ(output_text(t2), output_text(ref));
  EXPECT_GE(t2["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(),
            t1["usage"]["total_tokens"].get<int64_t>() - 2)
      << t2["usage"].dump();
  // a deleted response's items are no longer found
  int st = 0;
  auto d = s.client->Delete(("/v1/responses/" + t1["id"].get<std::string>()).c_str());
  ASSERT_TRUE(d && d->status == 200);
  const json gone = s.post("/v1/responses", responses({{"input", by_ref}}), &st);
  EXPECT_EQ(st, 400) << gone.dump();
  EXPECT_EQ(gone["error"]["param"], "input[1].id") << gone.dump();
}

// GET /v1/responses/{id} answers the stored Response as it was sent; DELETE forgets it; a response
// made with store: false, deleted, or another key's is not found, naming the id.
TEST(ServerResponses, StoredResponsesAreFoundDeletedAndRefusedByTheirId) {
  ServerOptions o = Served::options(fixture("qwen3"));
  o.api_keys = {"key-a", "key-b"};
  tiny::TestServer s(o, tiny::model_path("qwen2", DType::F32, "ctx=4096"));
  auto call = [&](const char* method, const std::string& path, const std::string& key,
                  const json& body, int* status) {
    httplib::Headers h = {{"Authorization", "Bearer " + key}};
    auto r = std::string(method) == "POST"
                 ? s.client->Post(path, h, body.dump(), "application/json")
             : std::string(method) == "GET" ? s.client->Get(path, h)
                                            : s.client->Delete(path, h);
    *status = r ? r->status : 0;
    return r ? json::parse(r->body) : json();
  };
  int st = 0;
  const json kept = call("POST", "/v1/responses", "key-a", responses({{"input", "Hi."}}), &st);
  ASSERT_EQ(st, 200) << kept.dump();
  const std::string id = kept["id"];
  EXPECT_EQ(call("GET", "/v1/responses/" + id, "key-a", {}, &st), kept);
  EXPECT_EQ(st, 200);
  auto not_found = [&](const json& r, int status, int want, const std::string& param) {
    EXPECT_EQ(status, want) << r.dump();
    EXPECT_NE(r["error"]["message"].get<std::string>().find(id), std::string::npos) << r.dump();
    EXPECT_EQ(r["error"].value("param", json()), param.empty() ? json() : json(param)) << r.dump();
  };
  const json other = call("GET", "/v1/responses/" + id, "key-b", {}, &st);
  not_found(other, st, 404, "");
  const json cont = call("POST", "/v1/responses", "key-b",
                         responses({{"previous_response_id", id}, {"input", "More."}}), &st);
  not_found(cont, st, 400, "previous_response_id");

  const json gone = call("DELETE", "/v1/responses/" + id, "key-a", {}, &st);
  EXPECT_EQ(st, 200);
  EXPECT_EQ(gone, json({{"id", id}, {"object", "response"}, {"deleted", true}}));
  const json get_gone = call("GET", "/v1/responses/" + id, "key-a", {}, &st);
  not_found(get_gone, st, 404, "");
  const json delete_gone = call("DELETE", "/v1/responses/" + id, "key-a", {}, &st);
  not_found(delete_gone, st, 404, "");

  const json unkept =
      call("POST", "/v1/responses", "key-a", responses({{"input", "Hi."}, {"store", false}}), &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(unkept["store"], false);
  call("GET", "/v1/responses/" + unkept["id"].get<std::string>(), "key-a", {}, &st);
  EXPECT_EQ(st, 404);
}

// --responses-store-mb bounds the store: under a small budget the oldest responses go (least
// recently used first) while the newest stays found; a budget of 0 keeps none.
TEST(ServerResponses, TheStoreKeepsItsByteBudget) {
  ServerOptions o = Served::options(fixture("qwen3"));
  o.responses_store_bytes = 16 << 10;
  tiny::TestServer s(o, tiny::model_path("qwen2", DType::F32, "ctx=4096"));
  auto found = [&](const json& r) {
    int st = 0;
    s.get("/v1/responses/" + r["id"].get<std::string>(), &st);
    return st == 200;
  };
  std::vector<json> made;  // 40 responses: more than 16 KiB of JSON
  for (int i = 0; i < 40; ++i)
    made.push_back(post_ok(s, "/v1/responses", responses({{"input", "A story, please."}})));
  EXPECT_TRUE(found(made[39]));
  EXPECT_TRUE(found(made[38]));  // several fit
  EXPECT_TRUE(found(made[36]));
  EXPECT_FALSE(found(made[0]));  // (a GET makes a response the most recently used: last)
  std::printf("one stored response: %zu bytes of JSON (its input items besides)\n",
              made[39].dump().size());

  o.responses_store_bytes = 0;
  tiny::TestServer none(o, tiny::model_path("qwen2", DType::F32, "ctx=4096"));
  const json r = post_ok(none, "/v1/responses", responses({{"input", "Hi."}}));
  int st = 0;
  none.get("/v1/responses/" + r["id"].get<std::string>(), &st);
  EXPECT_EQ(st, 404);
}
