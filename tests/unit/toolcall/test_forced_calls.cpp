// Forced tool calls: generations under each format's forced-call grammar (harmony's too: one call
// after an optional analysis message, parsed by toolcall/harmony.h), driven by random
// logits over a small vocabulary, always parse (toolcall/parser.h) into calls of the offered
// tools whose arguments validate against the tool's parameters (Python's jsonschema); a named
// choice calls only that tool; one call when parallel calls are off. And the triggered
// constraint: free text until the call's marker, the grammar after it.
#include <gtest/gtest.h>

#include <random>

#include "grammar/constraint.h"
#include "grammar/triggered.h"
#include "support/jsonschema_oracle.h"
#include "toolcall/forced.h"
#include "toolcall/harmony.h"
#include "toolcall/parser.h"
#include "unit/grammar/grammar_util.h"

namespace kamera::toolcall {
namespace {

using ojson = nlohmann::ordered_json;
using grammar::CompiledGrammar;
using grammar::TokenTrie;

std::shared_ptr<const TokenTrie> vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
  for (std::string_view p :
       {kHermesOpen, kHermesClose, kDsCallsBegin, kDsCallsEnd, kDsCallBegin, kDsCallEnd, kDsSep})
    v.push_back(std::string(p));
  for (const char* p : {"{\"", "\": ", "\", \"", "\"}", "name", "city", "get_weather", "search",
                        "```json", "\n```", "function", "true", "12"})
    v.push_back(p);
  v.push_back("");  // end of generation
  return std::make_shared<const TokenTrie>(v, std::vector<int32_t>{int32_t(v.size() - 1)});
}

const std::vector<ToolSpec> kTools = {
    {"get_weather", ojson::parse(R"({"type":"object","properties":{"city":{"type":"string",
      "maxLength":8},"unit":{"enum":["c","f"]}},"required":["city"],
      "additionalProperties":false})")},
    {"search", ojson::parse(R"({"type":"object","properties":{"q":{"type":"string",
      "maxLength":6},"n":{"type":"integer","minimum":1,"maximum":5}},"required":["q","n"],
      "additionalProperties":false})")},
    {"ping", ojson::parse(R"({"type":"object","properties":{},"additionalProperties":false})")},
};

std::string sample(grammar::TokenConstraint& c, const TokenTrie& trie, std::mt19937& rng,
                   int max_tokens, const std::string& forced_prefix = "") {
  std::string text;
  std::uniform_real_distribution<float> u(0.0f, 3.0f);
  for (int i = 0; i < max_tokens; ++i) {
    std::vector<float> logits(size_t(trie.n_vocab()));
    for (float& x : logits) x = u(rng);
    int32_t t = -1;
    if (i < int(forced_prefix.size())) {
      t = int32_t(uint8_t(forced_prefix[size_t(i)]));
    } else {
      c.mask(logits);
      t = grammar_test::sample_masked(logits, rng);
    }
    EXPECT_TRUE(c.accept(t).ok());
    if (trie.is_eog(t)) break;
    text += trie.bytes(t);
  }
  return text;
}

TEST(ForcedCalls, EveryGenerationIsAValidCall) {
  auto trie = vocab();
  std::mt19937 rng(3);
  std::vector<oracle::SchemaDocs> batch;
  for (const ToolSpec& t : kTools)
    batch.push_back(
        {t.parameters.is_null() ? ojson::parse(R"({"type":"object"})") : t.parameters, {}});
  size_t calls = 0;
  for (Format f : {Format::Hermes, Format::Llama3, Format::DeepSeek3}) {
    for (bool parallel : {false, true}) {
      auto g = forced_calls_grammar(f, ForcedCalls{kTools, parallel});
      ASSERT_TRUE(g.ok()) << g.message();
      auto cg = std::make_shared<const CompiledGrammar>(*g, trie);
      for (int run = 0; run < 12; ++run) {
        grammar::GrammarConstraint c(cg);
        const std::string text = sample(c, *trie, rng, 3000);
        ASSERT_TRUE(c.ended()) << format_name(f) << ": did not finish: " << text;
        ToolCallParser p(f);
        p.feed(text);
        p.finish();
        EXPECT_EQ(p.content(), "") << text;
        ASSERT_GE(p.calls().size(), 1u) << text;
        if (!parallel || f == Format::Llama3) {
          EXPECT_EQ(p.calls().size(), 1u) << text;
        }
        for (const ToolCall& call : p.calls()) {
          size_t k = 0;
          while (k < kTools.size() && kTools[k].name != call.name) ++k;
          ASSERT_LT(k, kTools.size()) << "unknown tool " << call.name << " in " << text;
          batch[k].docs.push_back(call.arguments);
          ++calls;
        }
      }
    }
  }
  EXPECT_GE(calls, 72u);
  const auto verdicts = oracle::validate(batch);
  REQUIRE_ORACLE(verdicts);
  for (size_t k = 0; k < batch.size(); ++k)
    for (size_t j = 0; j < batch[k].docs.size(); ++j)
      EXPECT_TRUE((*verdicts)[k][j]) << kTools[k].name << " arguments " << batch[k].docs[j];
}

// Whitespace outside strings of JSON text that is not the one space after a ',' or ':' (the
// layout templates write with tojson); -1 when the text is not JSON.
int stray_whitespace(const std::string& text) {
  if (ojson::parse(text, nullptr, false).is_discarded()) return -1;
  int stray = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    const bool ws = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (!ws) continue;
    const bool after_sep = i > 0 && (text[i - 1] == ',' || text[i - 1] == ':');
    if (!(c == ' ' && after_sep)) ++stray;
  }
  return stray;
}

// Forced arguments spend no token on layout: random logits (which favour whitespace, the most
// allowed bytes) give arguments with no whitespace but one space after each ',' and ':'.
TEST(ForcedCalls, ArgumentsTakeTheCompactLayout) {
  auto trie = vocab();
  std::mt19937 rng(5);
  int calls = 0;
  for (Format f : {Format::Hermes, Format::Llama3, Format::DeepSeek3}) {
    auto g = forced_calls_grammar(f, ForcedCalls{kTools, false});
    ASSERT_TRUE(g.ok()) << g.message();
    auto cg = std::make_shared<const CompiledGrammar>(*g, trie);
    for (int run = 0; run < 8; ++run) {
      grammar::GrammarConstraint c(cg);
      const std::string text = sample(c, *trie, rng, 3000);
      ToolCallParser p(f);
      p.feed(text);
      p.finish();
      ASSERT_EQ(p.calls().size(), 1u) << text;
      EXPECT_EQ(stray_whitespace(p.calls()[0].arguments), 0) << p.calls()[0].arguments;
      ++calls;
    }
  }
  EXPECT_EQ(calls, 24);
}

TEST(ForcedCalls, NamedChoiceCallsOnlyThatTool) {
  auto trie = vocab();
  std::mt19937 rng(9);
  auto g = forced_calls_grammar(Format::Hermes, ForcedCalls{{kTools[1]}, true});
  ASSERT_TRUE(g.ok()) << g.message();
  auto cg = std::make_shared<const CompiledGrammar>(*g, trie);
  for (int run = 0; run < 10; ++run) {
    grammar::GrammarConstraint c(cg);
    ToolCallParser p(Format::Hermes);
    p.feed(sample(c, *trie, rng, 600));
    p.finish();
    ASSERT_GE(p.calls().size(), 1u);
    for (const ToolCall& call : p.calls()) EXPECT_EQ(call.name, "search");
  }
}

TEST(ForcedCalls, NoParametersMeansAnyObject) {
  auto g = forced_calls_grammar(Format::Llama3, ForcedCalls{{{"f", nullptr}}, false});
  ASSERT_TRUE(g.ok()) << g.message();
  auto cg = std::make_shared<const CompiledGrammar>(*g, vocab());
  for (const char* args : {"{}", "{\"a\": [1, {\"b\": null}]}"}) {
    grammar::GrammarConstraint c(cg);
    EXPECT_TRUE(c.accept_text(std::string("{\"name\": \"f\", \"parameters\": ") + args + "}").ok());
    EXPECT_TRUE(c.complete()) << args;
  }
  grammar::GrammarConstraint c(cg);
  EXPECT_FALSE(c.accept_text("{\"name\": \"f\", \"parameters\": [").ok());
}

TEST(ForcedCalls, UnsupportedParametersAreRefusedNamingTheTool) {
  auto g = forced_calls_grammar(Format::Hermes,
                                ForcedCalls{{{"f", ojson::parse(R"({"type":"object","properties":
        {"d":{"type":"string","format":"date"}}})")}},
                                            true});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.message().find("tool 'f'"), std::string::npos) << g.message();
  EXPECT_NE(g.message().find("'format'"), std::string::npos) << g.message();
}

TEST(TriggeredConstraint, FreeTextThenTheCallGrammar) {
  auto trie = vocab();
  std::mt19937 rng(4);
  auto g = forced_calls_grammar(Format::Hermes, ForcedCalls{kTools, false});
  ASSERT_TRUE(g.ok());
  auto cg = std::make_shared<const CompiledGrammar>(*g, trie);
  for (int run = 0; run < 8; ++run) {
    grammar::TriggeredConstraint c(cg, std::string(call_trigger(Format::Hermes)));
    EXPECT_TRUE(c.complete());  // free text may end anywhere
    const std::string prefix = "Let me look: <tool_call>";
    const std::string text = sample(c, *trie, rng, 600, prefix);
    EXPECT_TRUE(c.active());
    EXPECT_FALSE(c.broken());
    ToolCallParser p(Format::Hermes);
    p.feed(text);
    p.finish();
    EXPECT_EQ(p.content(), "Let me look:");
    ASSERT_EQ(p.calls().size(), 1u) << text;
  }
}

// The byte vocabulary with harmony's markers as whole tokens too.
std::shared_ptr<const TokenTrie> harmony_vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
  for (std::string_view p :
       {kHarmonyStart, kHarmonyEnd, kHarmonyMessage, kHarmonyChannel, kHarmonyConstrain,
        std::string_view("commentary"), std::string_view("analysis")})
    v.push_back(std::string(p));
  v.push_back("");  // end of generation (<|call|>)
  return std::make_shared<const TokenTrie>(v, std::vector<int32_t>{int32_t(v.size() - 1)});
}

TEST(ForcedCalls, HarmonyGenerationsAreOneValidCallAfterAnOptionalAnalysis) {
  auto trie = harmony_vocab();
  std::mt19937 rng(5);
  std::vector<oracle::SchemaDocs> batch;
  for (const ToolSpec& t : kTools) batch.push_back({t.parameters, {}});
  int with_analysis = 0;
  for (bool parallel : {false, true}) {
    auto g = forced_calls_grammar(Format::Harmony, ForcedCalls{kTools, parallel});
    ASSERT_TRUE(g.ok()) << g.message();
    auto cg = std::make_shared<const CompiledGrammar>(*g, trie);
    for (int run = 0; run < 12; ++run) {
      grammar::GrammarConstraint c(cg);
      const std::string text = sample(c, *trie, rng, 6000);
      ASSERT_TRUE(c.ended()) << "did not finish: " << text;
      HarmonyParser p;
      p.feed(text);
      p.finish();
      EXPECT_EQ(p.content(), "") << text;
      with_analysis += !p.reasoning().empty();
      ASSERT_EQ(p.calls().size(), 1u) << text;  // <|call|> ends the generation
      size_t k = 0;
      while (k < kTools.size() && kTools[k].name != p.calls()[0].name) ++k;
      ASSERT_LT(k, kTools.size()) << text;
      batch[k].docs.push_back(p.calls()[0].arguments);
    }
  }
  EXPECT_GT(with_analysis, 0);
  EXPECT_LT(with_analysis, 24);
  const auto verdicts = oracle::validate(batch);
  REQUIRE_ORACLE(verdicts);
  for (size_t k = 0; k < batch.size(); ++k)
    for (size_t j = 0; j < batch[k].docs.size(); ++j)
      EXPECT_TRUE((*verdicts)[k][j]) << kTools[k].name << " arguments " << batch[k].docs[j];
}

TEST(TriggeredConstraint, HarmonyFreeAnalysisThenTheCallGrammar) {
  auto trie = harmony_vocab();
  std::mt19937 rng(6);
  auto g = forced_calls_grammar(Format::Harmony, ForcedCalls{kTools, true});
  ASSERT_TRUE(g.ok());
  auto cg = std::make_shared<const CompiledGrammar>(*g, trie);
  for (int run = 0; run < 8; ++run) {
    grammar::TriggeredConstraint c(cg, std::string(call_trigger(Format::Harmony)));
    const std::string prefix =
        "<|channel|>analysis<|message|>Let me look.<|end|><|start|>assistant"
        "<|channel|>commentary to=functions.";
    const std::string text = sample(c, *trie, rng, 600, prefix);
    EXPECT_TRUE(c.active());
    EXPECT_FALSE(c.broken());
    HarmonyParser p;
    p.feed(text);
    p.finish();
    EXPECT_EQ(p.reasoning(), "Let me look.");
    EXPECT_EQ(p.content(), "");
    ASSERT_EQ(p.calls().size(), 1u) << text;
    EXPECT_FALSE(ojson::parse(p.calls()[0].arguments, nullptr, false).is_discarded()) << text;
  }
}

}  // namespace
}  // namespace kamera::toolcall
