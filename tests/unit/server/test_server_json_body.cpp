// A request body is parsed once, in its order (issue 45): /v1/chat/completions, /v1/responses and
// /v1/messages each parse their body once (body_parses, counted by parse_body), and the schema
// their constrained decoding follows lists its properties in the order the client wrote them.
// The reference is the request's own text: a schema naming "zeta" before "alpha" gets a document
// that writes "zeta" first (json, std::map-backed, sorts keys: "alpha" would come first; before
// the fix /v1/messages went through json and answered "alpha" first).
#include <gtest/gtest.h>

#include <type_traits>

#include "server/json_fields.h"
#include "server/media_parts.h"
#include "server/openai.h"
#include "server/request_fields.h"
#include "support/chat_templates.h"
#include "support/test_server.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

struct Served : tiny::TestServer {
  Served() : TestServer(options(), tiny::model_path("qwen2", DType::F32, "ctx=4096")) {}
  static ServerOptions options() {
    ServerOptions o;
    o.chat_template = tiny::template_fixture("qwen3");
    return o;
  }
  // The answer to `text` (the body as the client wrote it), and the bodies parse_body parsed.
  json post_text(const std::string& path, const std::string& text, int64_t* parses) {
    const int64_t before = body_parses();
    auto r = client->Post(path.c_str(), text, "application/json");
    *parses = body_parses() - before;
    EXPECT_TRUE(r && r->status == 200) << path << ": " << (r ? r->body : "no answer");
    return r ? json::parse(r->body, nullptr, false) : json();
  }
};

// Properties not in alphabetical order: "zeta" first.
const char* kSchema =
    R"({"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}},
        "required": ["zeta", "alpha"], "additionalProperties": false})";

const char* kCommon = R"("max_tokens": 200, "temperature": 0.7, "seed": 4)";

// The answer's document: "zeta" is written before "alpha".
void expect_schema_order(const std::string& doc) {
  const size_t z = doc.find("\"zeta\""), a = doc.find("\"alpha\"");
  ASSERT_NE(z, std::string::npos) << doc;
  ASSERT_NE(a, std::string::npos) << doc;
  EXPECT_LT(z, a) << "the schema lists zeta first: " << doc;
}

}  // namespace

TEST(ServerJsonBody, ChatCompletionsParseTheBodyOnceInItsOrder) {
  Served s;
  const std::string body =
      std::string(R"({"messages": [{"role": "user", "content": "Two numbers as JSON."}], )") +
      kCommon + R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", )" +
      R"("schema": )" + kSchema + "}}}";
  int64_t parses = 0;
  const json r = s.post_text("/v1/chat/completions", body, &parses);
  EXPECT_EQ(parses, 1);
  expect_schema_order(r["choices"][0]["message"]["content"].get<std::string>());
}

TEST(ServerJsonBody, ResponsesParseTheBodyOnceInItsOrder) {
  Served s;
  const std::string body =
      std::string(R"({"model": "m", "input": "Two numbers as JSON.", )") +
      R"("max_output_tokens": 200, "temperature": 0.7, "seed": 4, "store": false, )" +
      R"("text": {"format": {"type": "json_schema", "name": "x", "schema": )" + kSchema + "}}}";
  int64_t parses = 0;
  const json r = s.post_text("/v1/responses", body, &parses);
  EXPECT_EQ(parses, 1);
  std::string text;
  for (const json& item : r["output"])
    if (item["type"] == "message") text += item["content"][0]["text"].get<std::string>();
  expect_schema_order(text);
}

TEST(ServerJsonBody, MessagesParseTheBodyOnceInItsOrder) {
  Served s;
  const std::string body =
      std::string(R"({"model": "m", "messages": [{"role": "user", "content": "Two numbers."}], )") +
      kCommon + R"(, "output_config": {"format": {"type": "json_schema", "schema": )" + kSchema +
      "}}}";
  int64_t parses = 0;
  const json m = s.post_text("/v1/messages", body, &parses);
  EXPECT_EQ(parses, 1);
  std::string text;
  for (const json& b : m["content"])
    if (b["type"] == "text") text += b["text"].get<std::string>();
  expect_schema_order(text);
  // count_tokens: the same body, parsed once too
  s.post_text("/v1/messages/count_tokens", body, &parses);
  EXPECT_EQ(parses, 1);
}

// The prompt code reads the body where parse_body put it (issue 45): every entry point takes the
// ordered body, so no handler copies it into json first (a copy, node by node, of all of it, and
// json sorts each object's keys). A function's first parameter type, checked as the build runs.
namespace {
template <class R, class A, class... Rest>
A first_param(R (*)(A, Rest...));
template <auto F>
constexpr bool reads_as_parsed =
    std::is_same_v<decltype(first_param(F)), const nlohmann::ordered_json&>;
}  // namespace
static_assert(reads_as_parsed<&gen_requests> && reads_as_parsed<&gen_request>);
static_assert(reads_as_parsed<&check_fields> && reads_as_parsed<&generation_fields> &&
              reads_as_parsed<&include_usage>);
static_assert(reads_as_parsed<&chat_parts> && reads_as_parsed<&completion_prompts> &&
              reads_as_parsed<&template_variables> && reads_as_parsed<&word_chat_parts>);
static_assert(reads_as_parsed<&has_media_parts> && reads_as_parsed<&has_media_items>);

// An assistant's tool call whose arguments are an object ("zeta" before "alpha") renders them in
// that order, as it renders the same arguments sent as a string (parsed in order): the two
// prompts are the same, so the second is served whole from the first's prefix. The reference is
// the string form sent twice. Before, the body was copied into json, the object's keys sorted,
// and the prompt differed from the string form's at the arguments.
TEST(ServerJsonBody, ToolCallArgumentsRenderInTheClientsOrder) {
  Served s;
  auto body = [](bool as_object) {
    const std::string args = R"({"zeta": 1, "alpha": 2})";
    return std::string(R"({"messages": [{"role": "user", "content": "Add them."}, )") +
           R"({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": )" +
           R"("function", "function": {"name": "add", "arguments": )" +
           (as_object ? args : json(args).dump()) + R"(}}]}, )" +
           R"({"role": "tool", "tool_call_id": "c1", "content": "3"}, )" +
           R"({"role": "user", "content": "And now?"}], )" +
           R"("tools": [{"type": "function", "function": {"name": "add", "parameters": )" +
           kSchema + R"(}}], "max_tokens": 1, "temperature": 0})";
  };
  int64_t parses = 0;
  const json first = s.post_text("/v1/chat/completions", body(false), &parses);
  const json object = s.post_text("/v1/chat/completions", body(true), &parses);
  const json again = s.post_text("/v1/chat/completions", body(false), &parses);
  EXPECT_EQ(parses, 1);
  const int prompt = first["usage"]["prompt_tokens"].get<int>();
  EXPECT_EQ(object["usage"]["prompt_tokens"], prompt);
  const int cached = again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GT(cached, prompt / 2) << again.dump();
  EXPECT_EQ(object["usage"]["prompt_tokens_details"]["cached_tokens"], cached) << object.dump();
}
