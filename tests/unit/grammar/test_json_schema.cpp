// The JSON Schema compiler against an independent validator (Python's jsonschema): on a table
// of schemas and documents written the way kamera writes JSON (its whitespace, the schema's
// property order, no exponents), kamera's grammar accepts a document exactly when the validator
// does. Documents that validate but that kamera never writes (another property order, 1e3, a
// lone surrogate) are listed apart: the grammar refuses them, the validator accepts them.
// Unsupported keywords are refused by name, with the path where they appear.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "support/jsonschema_oracle.h"
#include "unit/grammar/grammar_util.h"

namespace kamera::grammar {
namespace {

using grammar_test::accepts;
using ojson = nlohmann::ordered_json;

struct Case {
  std::string schema;
  std::vector<std::string> docs;    // in kamera's form: grammar verdict == validator verdict
  std::vector<std::string> subset;  // valid, never written by kamera
};

std::vector<std::string> number_grid() {
  std::vector<std::string> out;
  for (int i = -24; i <= 24; ++i) {
    const int whole = i / 8, eighth = std::abs(i % 8);
    static const char* frac[] = {"", ".125", ".25", ".375", ".5", ".625", ".75", ".875"};
    const std::string sign = i < 0 ? "-" : "";
    out.push_back(sign + std::to_string(std::abs(whole)) + frac[eighth]);
  }
  for (const char* s : {"2.2", "2.24999", "2.25", "2.250", "2.2500001", "-1.5", "-1.50", "-1.4999",
                        "0.0", "0.00", "10", "100.5", "-100", "0.1", "0.3", "0.30000000000001"})
    out.push_back(s);
  return out;
}

std::vector<Case> cases() {
  return {
      {R"({"type":"object","properties":{"name":{"type":"string"},
          "age":{"type":"integer","minimum":0,"maximum":150}},
          "required":["name"],"additionalProperties":false})",
       {R"({"name":"Ann"})", R"({"name":"Ann","age":30})", R"({"name": "Ann", "age": 150})",
        R"({"name":"Ann","age":151})", R"({"name":"Ann","age":-1})", R"({"age":3})", "{}",
        R"({"name":3})", R"({"name":"A\u00e9\"x"})", R"({"name":"Ann","age":30.5})",
        "{\n  \"name\": \"Bo\",\n  \"age\": 7\n}", R"({"name":"Ann",})", R"({"name":"Ann"}x)",
        R"({"name":"Ann","age":0})", R"({"name":"","age":100})"},
       {R"({"age":30,"name":"Ann"})", R"({"name":"Ann","age":3e1})", R"({"name":"Ann"}  )"}},
      {R"({"enum":["red","green",3,null,{"a":[1,2]}]})",
       {R"("red")", "3", "null", R"({"a":[1,2]})", R"("blue")", "4", "[]"},
       {}},
      {R"({"const":"x"})", {R"("x")", R"("y")", "1"}, {}},
      {R"({"type":"string","enum":["a",1]})", {R"("a")", "1"}, {}},
      {R"({"type":["string","null"],"maxLength":3})",
       {R"("abc")", R"("abcd")", "null", "1", R"("日本語")", R"("日本語x")", R"("\ud83d\ude00ab")",
        R"("😀abc")", R"("")"},
       {}},
      {R"({"type":"string","minLength":2})", {R"("ab")", R"("a")", R"("\n\t")", R"("é")"}, {}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
       {"[1]", "[1,2,3]", "[]", "[1,2,3,4]", R"([1,"a"])", "[ 1 , 2 ]", "[1,]"},
       {}},
      {R"({"type":"array","items":{"type":"array","items":{"type":"boolean"},"maxItems":2}})",
       {"[]", "[[]]", "[[true],[false,true]]", "[[true,true,true]]", "[[1]]"},
       {}},
      {R"({"type":"object","properties":{"pet":{"anyOf":[
          {"type":"object","properties":{"kind":{"const":"cat"},
           "lives":{"type":"integer","minimum":1,"maximum":9}},
           "required":["kind","lives"],"additionalProperties":false},
          {"type":"object","properties":{"kind":{"const":"dog"},"good":{"type":"boolean"}},
           "required":["kind"],"additionalProperties":false}]}},
          "required":["pet"],"additionalProperties":false})",
       {R"({"pet":{"kind":"cat","lives":9}})", R"({"pet":{"kind":"dog"}})",
        R"({"pet":{"kind":"dog","good":true}})", R"({"pet":{"kind":"cat"}})",
        R"({"pet":{"kind":"cat","lives":10}})", R"({"pet":{"kind":"bird"}})", R"({"pet":null})"},
       {}},
      {R"({"type":"number","minimum":-1.5,"exclusiveMaximum":2.25})", number_grid(), {"2e0"}},
      {R"({"type":"number","exclusiveMinimum":-1.5,"maximum":2.25})", number_grid(), {}},
      {R"({"type":"number","minimum":0.1,"maximum":0.30000000000000004})",
       number_grid(),
       {"0.30000000000000004"}},
      {R"({"type":"integer","exclusiveMinimum":-3,"maximum":12})",
       {"-3", "-2", "12", "13", "0", "5.5", "100", "-30", "7"},
       {"12.0"}},
      {R"({"type":"integer","minimum":1.5,"maximum":4.5})", {"1", "2", "3", "4", "5", "-2"}, {}},
      {R"({"type":"integer","maximum":1e20,"minimum":-9007199254740993})",
       {"99999999999999999", "-9007199254740993", "-9007199254740994", "0"},
       {}},
      {R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"number",
          "minimum":0,"exclusiveMinimum":true,"maximum":1})",
       {"0", "0.001", "1", "1.0001", "0.5", "-0.5"},
       {}},
      {R"({"type":"number"})", {"0", "-12.5", "123456789012345", "1.5", "-0.001"}, {"-0", "1E2"}},
      {"{}", {R"({"a":[1,{"b":null}],"c":"x"})", "[]", R"("s")", "1.5", "true", "tru", "nul"}, {}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
          "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},
          "required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":null}})", R"({"v":1})",
        R"({"v":1,"next":{"v":"x","next":null}})"},
       {}},
      {R"({"type":"string"})",
       {R"("a\"b")", R"("a\\b")", R"("\u0041")", "\"\x01\"", R"("a\qb")", R"("é")", R"("\/")"},
       {R"("\ud800")"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
          "c":{"type":"integer"}},"required":["b"]})",
       {R"({"b":1})", R"({"a":1,"b":2})", R"({"b":2,"c":3})", R"({"a":1,"b":2,"c":3})",
        R"({"a":1})", R"({"a":1,"c":3})", "{}", R"({"a":1,,"b":2})"},
       {R"({"b":1,"d":4})"}},
      {R"({"properties":{"a":{"type":"integer"},"b":{"type":"boolean"}},
          "additionalProperties":false})",
       {"{}", R"({"a":1})", R"({"b":true})", R"({"a":1,"b":false})", R"({"b":1})", R"({"c":1})"},
       {R"({"b":true,"a":1})"}},
  };
}

TEST(JsonSchema, GrammarAgreesWithAnIndependentValidator) {
  std::vector<oracle::SchemaDocs> batch;
  std::vector<std::vector<bool>> ours;
  const std::vector<Case> table = cases();
  for (const Case& c : table) {
    auto g = grammar_test::schema_grammar(c.schema);
    ASSERT_TRUE(g) << c.schema;
    oracle::SchemaDocs sd{ojson::parse(c.schema), {}};
    std::vector<bool> v;
    for (const std::string& d : c.docs) {
      sd.docs.push_back(d);
      v.push_back(accepts(*g, d));
    }
    for (const std::string& d : c.subset) {
      sd.docs.push_back(d);
      EXPECT_FALSE(accepts(*g, d)) << c.schema << "\nkamera writes " << d;
    }
    batch.push_back(std::move(sd));
    ours.push_back(std::move(v));
  }
  const auto verdicts = oracle::validate(batch);
  REQUIRE_ORACLE(verdicts);
  size_t checked = 0, valid = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    for (size_t j = 0; j < table[i].docs.size(); ++j, ++checked) {
      EXPECT_EQ(ours[i][j], (*verdicts)[i][j])
          << table[i].schema << "\ndocument " << table[i].docs[j] << ": kamera "
          << (ours[i][j] ? "accepts" : "refuses") << " it, the validator does not";
      valid += (*verdicts)[i][j];
    }
    for (size_t j = 0; j < table[i].subset.size(); ++j)
      EXPECT_TRUE((*verdicts)[i][table[i].docs.size() + j])
          << table[i].schema << "\n"
          << table[i].subset[j] << " is listed as valid";
  }
  EXPECT_GE(checked, 150u);
  EXPECT_GE(valid, 50u);
  EXPECT_GE(checked - valid, 50u);
}

TEST(JsonSchema, UnsupportedKeywordsAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"({"type":"string","pattern":"^a"})", "'pattern'"},
      {R"({"type":"string","format":"date-time"})", "'format'"},
      {R"({"oneOf":[{"type":"string"},{"type":"null"}]})", "'oneOf'"},
      {R"({"allOf":[{"type":"string"}]})", "'allOf'"},
      {R"({"not":{"type":"string"}})", "'not'"},
      {R"({"type":"array","prefixItems":[{"type":"string"}]})", "'prefixItems'"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
      {R"({"type":"object","additionalProperties":{"type":"string"}})", "'additionalProperties'"},
      {R"({"type":"array","items":[{"type":"string"}]})", "'items'"},
      {R"({"properties":{"x":{"type":"string","pattern":"a"}}})", "/properties/x"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "\"b\""},
      {R"({"type":"number","minimum":5,"maximum":3})", "bounds"},
      {R"({"type":"integer","minimum":1e20})", "bounds"},
      {R"({"type":"string","maxLength":100000})", "maxLength"},
      {R"({"type":"frobnicate"})", "frobnicate"},
      {R"({"$ref":"http://example.com/schema"})", "'$ref'"},
      {R"({"$ref":"#/$defs/missing"})", "points at nothing"},
      {R"({"anyOf":[{"type":"string"}],"minLength":2})", "'anyOf' next to 'minLength'"},
      {R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})",
       "left recursion"},
      {"false", "accepts nothing"},
  };
  for (const auto& [schema, needle] : refused) {
    auto g = json_schema_grammar(ojson::parse(schema));
    ASSERT_FALSE(g.ok()) << schema << " compiled";
    EXPECT_NE(g.message().find(needle), std::string::npos)
        << schema << ": '" << g.message() << "' does not name " << needle;
  }
}

TEST(JsonSchema, JsonObjectGrammarAcceptsAnyObjectOnly) {
  auto g = json_object_grammar();
  ASSERT_TRUE(g.ok()) << g.message();
  for (const char* ok : {"{}", R"({"a":1})", R"({"a":{"b":[1,2,{"c":null}]},"d":"e"})",
                         "{ \"x\" : [ ] }", R"({"k":-0.5,"t":true,"f":false})"})
    EXPECT_TRUE(accepts(**g, ok)) << ok;
  for (const char* bad : {"[]", "1", R"("s")", "{", R"({"a"})", R"({"a":})", R"({a:1})",
                          "{\"a\":\"\xff\"}", "{\"a\":\"\xc0\x80\"}", "{\"a\":\"\xed\xa0\x80\"}"})
    EXPECT_FALSE(accepts(**g, bad)) << bad;
}

}  // namespace
}  // namespace kamera::grammar
