// Token masks against a brute-force reference: for every token of a small vocabulary, does
// appending its bytes to the text so far leave a prefix of some document (a fresh matcher reads
// the whole text each time, with no cache and no trie)? Checked at every step of generations
// driven by random logits, on several grammars; and the documents those generations complete
// are validated by Python's jsonschema.
#include <gtest/gtest.h>

#include <random>

#include "grammar/constraint.h"
#include "grammar/json_schema.h"
#include "support/jsonschema_oracle.h"
#include "unit/grammar/grammar_util.h"

namespace kamera::grammar {
namespace {

using ojson = nlohmann::ordered_json;

// Every single byte, JSON-ish pieces (some spanning a string's end and what follows it, some
// splitting a UTF-8 character), two tokens with no text, and an end-of-generation token.
std::shared_ptr<const TokenTrie> small_vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
  for (const char* p : {"{\"",     "\"}",       "\":",   "\",",   "\", \"", "\": \"",  "\"]",
                        "\"},",    "},{",       "[{",    "}]",    "true",   "false",   "null",
                        "12",      "1.",        ".5",    "-0",    "00",     "\\u",     "\\ud83d",
                        "\\ude00", "\\n",       "é",     "\xc3",  "\xa9\"", "日本",    "\xe6\x97",
                        "name",    "\"name\":", "age",   " {",    "\n  ",   ",\n  \"", "ab",
                        "abc",     "\"\"",      "\"x\"", "cat\"", "dog\"}", "e5",      "red"})
    v.push_back(p);
  v.push_back("");  // a control token: no text
  v.push_back("");
  v.push_back("");  // end of generation
  return std::make_shared<const TokenTrie>(v, std::vector<int32_t>{int32_t(v.size() - 1)});
}

const char* kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
        "age":{"type":"integer","minimum":-5,"maximum":120},
        "tags":{"type":"array","items":{"enum":["red","cat","dog"]},"maxItems":3}},
        "required":["name"],"additionalProperties":false})",
    R"({"anyOf":[{"type":"number","minimum":0.5,"exclusiveMaximum":12.25},{"type":"null"},
        {"type":"array","items":{"type":"string","maxLength":4},"minItems":1,"maxItems":2}]})",
    R"({"type":"object","properties":{"pet":{"anyOf":[
        {"type":"object","properties":{"kind":{"const":"cat"},"lives":{"type":"integer",
         "minimum":1,"maximum":9}},"required":["kind","lives"],"additionalProperties":false},
        {"type":"object","properties":{"kind":{"const":"dog"}},"required":["kind"],
         "additionalProperties":false}]},"ok":{"type":"boolean"}},"required":["pet"],
        "additionalProperties":false})",
    R"({"type":"string","maxLength":6})",
};

// Reference: token t is allowed after `text` when text + bytes(t) is a prefix of a document;
// end of generation when text is a whole one.
std::vector<bool> brute_force(const Grammar& g, const TokenTrie& trie, const std::string& text) {
  std::vector<bool> out(size_t(trie.n_vocab()), false);
  for (int32_t t = 0; t < trie.n_vocab(); ++t) {
    if (trie.is_eog(t))
      out[size_t(t)] = grammar_test::accepts(g, text);
    else if (!trie.bytes(t).empty())
      out[size_t(t)] = grammar_test::is_prefix(g, text + trie.bytes(t));
  }
  return out;
}

// Samples one document with random logits; checks every step's mask against the reference
// when `check`. Returns the text, complete or not.
std::string generate(const std::shared_ptr<const CompiledGrammar>& cg, std::mt19937& rng,
                     bool check, int max_tokens, bool* complete) {
  GrammarConstraint c(cg);
  const TokenTrie& trie = cg->trie();
  std::string text;
  std::uniform_real_distribution<float> u(0.0f, 3.0f);
  for (int step = 0; step < max_tokens; ++step) {
    std::vector<float> logits(size_t(trie.n_vocab()) + 5);  // the model's padding
    for (float& x : logits) x = u(rng);
    c.mask(logits);
    if (check) {
      const std::vector<bool> ref = brute_force(cg->grammar(), trie, text);
      for (size_t t = 0; t < logits.size(); ++t) {
        const bool ours = std::isfinite(logits[t]);
        const bool want = t < ref.size() && ref[t];
        EXPECT_EQ(ours, want) << "after '" << text << "': token " << t << " '"
                              << (t < ref.size() ? trie.bytes(int32_t(t)) : "") << "'";
        if (ours != want) return text;
      }
    }
    const int32_t t = grammar_test::sample_masked(logits, rng);
    EXPECT_TRUE(c.accept(t).ok()) << "token " << t << " after '" << text << "'";
    if (trie.is_eog(t)) break;
    text += trie.bytes(t);
  }
  *complete = c.ended();
  return text;
}

TEST(TokenMask, EqualsBruteForceAtEveryStep) {
  auto trie = small_vocab();
  std::mt19937 rng(11);
  size_t steps = 0;
  for (const char* schema : kSchemas) {
    auto g = grammar_test::schema_grammar(schema);
    ASSERT_TRUE(g);
    auto cg = std::make_shared<const CompiledGrammar>(g, trie);
    for (int run = 0; run < 3; ++run) {
      bool complete = false;
      const std::string text = generate(cg, rng, true, 60, &complete);
      steps += text.size();
      if (HasFailure()) return;
    }
  }
  EXPECT_GE(steps, 150u);
}

TEST(TokenMask, RandomGenerationsAlwaysValidate) {
  auto trie = small_vocab();
  std::mt19937 rng(5);
  std::vector<oracle::SchemaDocs> batch;
  size_t completed = 0, total = 0;
  for (const char* schema : kSchemas) {
    auto g = grammar_test::schema_grammar(schema);
    ASSERT_TRUE(g);
    auto cg = std::make_shared<const CompiledGrammar>(g, trie);
    oracle::SchemaDocs sd{ojson::parse(schema), {}};
    for (int run = 0; run < 40; ++run, ++total) {
      bool complete = false;
      const std::string text = generate(cg, rng, false, 400, &complete);
      if (!complete) continue;
      ++completed;
      EXPECT_TRUE(grammar_test::accepts(*g, text)) << text;
      sd.docs.push_back(text);
    }
    batch.push_back(std::move(sd));
  }
  EXPECT_GE(completed, total * 3 / 4) << "most generations should complete in 400 tokens";
  const auto verdicts = oracle::validate(batch);
  REQUIRE_ORACLE(verdicts);
  for (size_t i = 0; i < batch.size(); ++i)
    for (size_t j = 0; j < batch[i].docs.size(); ++j)
      EXPECT_TRUE((*verdicts)[i][j]) << kSchemas[i] << "\ngenerated " << batch[i].docs[j];
}

TEST(TokenMask, EndOfGenerationOnlyWhenComplete) {
  auto trie = small_vocab();
  auto g = grammar_test::schema_grammar(R"({"type":"string","maxLength":2})");
  auto cg = std::make_shared<const CompiledGrammar>(g, trie);
  GrammarConstraint c(cg);
  const int32_t eog = trie->eog()[0];
  EXPECT_FALSE(c.allowed().eog);
  EXPECT_FALSE(c.accept(eog).ok());
  ASSERT_TRUE(c.accept_text("\"ab").ok());
  EXPECT_FALSE(c.complete());
  EXPECT_FALSE(c.accept('c').ok());  // a third character breaks maxLength
  ASSERT_TRUE(c.accept('"').ok());
  EXPECT_TRUE(c.complete());
  const auto& a = c.allowed();
  EXPECT_TRUE(a.eog);
  EXPECT_EQ(a.count(), 0u);  // nothing may follow the document but its end
  std::vector<float> logits(size_t(trie->n_vocab()), 1.0f);
  c.mask(logits);
  for (size_t t = 0; t < logits.size(); ++t)
    EXPECT_EQ(std::isfinite(logits[t]), int32_t(t) == eog) << t;
  EXPECT_TRUE(c.accept(eog).ok());
  EXPECT_TRUE(c.ended());
  EXPECT_FALSE(c.accept('a').ok());
}

}  // namespace
}  // namespace kamera::grammar
