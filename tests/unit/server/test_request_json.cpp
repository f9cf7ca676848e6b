// Request bodies are bounded while they are parsed (issue 24, finding 1: 131,250 nested arrays
// overflowed the stack; 16.7M of them cost 1.28 GB), fields have strict types (finding 6: a
// string is not a boolean), and every error code the JSON layer answers is documented.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/openai.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

std::string nested(int depth, const std::string& inner = "") {
  return std::string(size_t(depth), '[') + inner + std::string(size_t(depth), ']');
}

std::string docs_server() {
  std::ifstream f(std::string(KAMERA_SOURCE_DIR) + "/docs/SERVER.md");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST(RequestJson, DepthIsCheckedWhileParsing) {
  const JsonLimits limits;  // 64
  json out;
  // The body object is one level: 63 arrays inside it make 64.
  EXPECT_FALSE(parse_body(R"({"a": )" + nested(63) + "}", limits, out));
  auto deep = parse_body(R"({"a": )" + nested(64) + "}", limits, out);
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->status, 400);
  EXPECT_EQ(deep->code, "json_too_deep");
  EXPECT_NE(deep->message.find("64"), std::string::npos) << deep->message;
  // The finding's body: a prompt nested 131,250 deep (a recursive copy of it overflowed the
  // stack); refused at depth 65, so nothing deeper is ever built.
  auto crash = parse_body(R"({"prompt": )" + nested(131250) + "}", limits, out);
  ASSERT_TRUE(crash);
  EXPECT_EQ(crash->code, "json_too_deep");
  // Objects count as arrays do.
  std::string objs;
  for (int i = 0; i < 70; ++i) objs += R"({"k": )";
  objs += "1" + std::string(70, '}');
  auto o = parse_body(objs, limits, out);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->code, "json_too_deep");
}

TEST(RequestJson, ValuesAreCountedWhileParsing) {
  JsonLimits limits;
  limits.max_values = 100;
  json out;
  // {"a": [x 97]}: the object, its key, the array, 97 numbers = 100 values.
  std::string ok = R"({"a": [)";
  for (int i = 0; i < 97; ++i) ok += (i ? ",0" : "0");
  EXPECT_FALSE(parse_body(ok + "]}", limits, out));
  EXPECT_EQ(out["a"].size(), 97u);
  auto over = parse_body(ok + ",0]}", limits, out);
  ASSERT_TRUE(over);
  EXPECT_EQ(over->code, "json_too_many_values");
  EXPECT_NE(over->message.find("100"), std::string::npos) << over->message;
  // Empty arrays are values too (the 32 MiB body of "[]," costs a node each).
  std::string many = R"({"a": [[])";
  for (int i = 1; i < 200; ++i) many += ",[]";
  auto empties = parse_body(many + "]}", limits, out);
  ASSERT_TRUE(empties);
  EXPECT_EQ(empties->code, "json_too_many_values");
}

TEST(RequestJson, MalformedJsonAnswersADocumentedCode) {
  json out;
  for (const char* body : {"{", "{\"prompt\": ", "[1, 2", "nul", "{} {}", "\"text\""}) {
    auto e = parse_body(body, JsonLimits{}, out);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->code, "invalid_json") << body;
  }
  // Every code the JSON layer answers is in docs/SERVER.md's list (finding 6: corrupt_data was
  // not), and so is what an operation's error code maps to.
  const std::string doc = docs_server();
  ASSERT_FALSE(doc.empty());
  for (const char* code : {"invalid_json", "json_too_deep", "json_too_many_values"})
    EXPECT_NE(doc.find(std::string("`") + code + "`"), std::string::npos) << code;
  for (ErrorCode c :
       {ErrorCode::InvalidArgument, ErrorCode::NotFound, ErrorCode::OutOfMemory,
        ErrorCode::CorruptData, ErrorCode::Unsupported, ErrorCode::Internal, ErrorCode::Io}) {
    const std::string code = http_error(Error{c, "x"}).code;
    EXPECT_NE(doc.find("`" + code + "`"), std::string::npos) << code;
  }
}

TEST(RequestJson, AStringIsNotABoolean) {
  const json b = {{"stream", "true"}, {"yes", true}, {"nothing", nullptr}, {"one", 1}};
  auto s = bool_field(b, "stream", false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("\"stream\""), std::string::npos) << s.message();
  EXPECT_FALSE(bool_field(b, "one", false).ok());
  EXPECT_TRUE(*bool_field(b, "yes", false));
  EXPECT_TRUE(*bool_field(b, "nothing", true));
  EXPECT_FALSE(*bool_field(b, "absent", false));
  EXPECT_FALSE(string_field(b, "one", "x").ok());
  EXPECT_EQ(*string_field(b, "absent", "x"), "x");
  // Through the completion request: "stream": "true" used to be silently not streamed.
  ModelConfig cfg;
  cfg.ctx_len = 256;
  cfg.n_vocab = 512;
  for (const char* field : {"stream", "deep_half"}) {
    auto r = gen_request({{"prompt", "hi"}, {field, "true"}}, false, ServerOptions{}, cfg);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_NE(r.message().find(field), std::string::npos) << r.message();
  }
  auto streamed = gen_request({{"prompt", "hi"}, {"stream", true}}, false, ServerOptions{}, cfg);
  ASSERT_TRUE(streamed.ok());
  EXPECT_TRUE(streamed->stream);
}

// A body parsed in its order (what schemas need) is bounded as a json body is, and counted.
TEST(RequestJson, AnOrderedBodyKeepsItsOrderUnderTheSameLimits) {
  const JsonLimits limits;
  nlohmann::ordered_json out;
  const int64_t before = body_parses();
  ASSERT_FALSE(parse_body(R"({"zeta": 1, "alpha": {"y": 2, "b": 3}})", limits, out));
  EXPECT_EQ(out.dump(), R"({"zeta":1,"alpha":{"y":2,"b":3}})");
  auto deep = parse_body(R"({"a": )" + nested(64) + "}", limits, out);
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->code, "json_too_deep");
  auto list = parse_body("[1]", limits, out);
  ASSERT_TRUE(list);
  EXPECT_EQ(list->code, "invalid_json");
  EXPECT_EQ(body_parses() - before, 3);
}

// to_ordered converts node by node: the same value (compared with the text a parse of the same
// JSON gives), every number's kind kept, keys in json's order (sorted).
TEST(RequestJson, ConversionsKeepEveryValueAndItsKind) {
  const std::string text =
      R"({"z": [18446744073709551615, -3, 1.5, "s\u00e9", null, true, {"y": {}, "b": []}], "a": 0})";
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  const json plain = json::parse(text);
  const nlohmann::ordered_json back = to_ordered(plain);
  EXPECT_TRUE(back["z"][0].is_number_unsigned());
  EXPECT_TRUE(back["z"][1].is_number_integer() && !back["z"][1].is_number_unsigned());
  EXPECT_TRUE(back["z"][2].is_number_float());
  EXPECT_EQ(back, nlohmann::ordered_json::parse(plain.dump()));
  EXPECT_EQ(dump(back), dump(plain));                  // json's order: sorted
  EXPECT_EQ(dump(ordered).substr(0, 6), R"({"z":[)");  // ordered_json's: the source's
  const nlohmann::ordered_json bad = "\xff";
  EXPECT_EQ(dump(bad), "\"\xEF\xBF\xBD\"");  // invalid UTF-8 replaced, never thrown
}
