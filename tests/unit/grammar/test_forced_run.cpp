// GrammarConstraint::forced (speculative decoding's forced drafts) against a brute-force
// reference: a fresh constraint replays the tokens so far, then, while the mask it puts on a
// vector of zeros leaves exactly one token finite and no end of generation, takes that token
// (with guess_text: or the longest finite token when every finite token is a prefix of it). At
// every step of random generations on several grammars (a schema with enums and required keys, a
// forced tool call), over a small vocabulary with single bytes and JSON-ish pieces; the state is
// left as it was (the mask after the walk is the mask before).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "grammar/constraint.h"
#include "grammar/triggered.h"
#include "toolcall/forced.h"
#include "unit/grammar/grammar_util.h"

namespace kamera::grammar {
namespace {

// Every printable byte and newline, pieces that span a forced run (keys with their quotes and
// colon, enum values, the hermes call frame), pieces that only begin one, two tokens with no
// text, and an end-of-generation token.
std::shared_ptr<const TokenTrie> vocab() {
  std::vector<std::string> v;
  for (int b = 32; b < 127; ++b) v.push_back(std::string(1, char(b)));
  v.push_back("\n");
  for (const char* p :
       {"{\"",          "\": \"",      "\", \"",       "\"}",     "\": ",         "role",
        "\"role\": \"", "admin",       "adm",          "edit",    "editor\"",     "viewer",
        "city",         "Paris",       "Par",          "Lyon\"",  "unit",         "celsius",
        "fahrenheit",   "<tool_call>", "</tool_call>", "name",    "\"name\": \"", "get_weather",
        "get",          "_weather",    "arguments",    "\": {\"", "\"}}",         "true",
        "false",        "12"})
    v.push_back(p);
  v.push_back("");
  v.push_back("");
  v.push_back("");  // end of generation
  return std::make_shared<const TokenTrie>(v, std::vector<int32_t>{int32_t(v.size() - 1)});
}

const char* kSchemas[] = {
    R"({"type":"object","properties":{"role":{"enum":["admin","editor","viewer"]},
        "city":{"enum":["Paris","Lyon","Pau"]},"n":{"type":"integer","minimum":0,"maximum":99},
        "ok":{"type":"boolean"}},"required":["role","city","n","ok"],
        "additionalProperties":false})",
    R"({"type":"object","properties":{"unit":{"enum":["celsius","fahrenheit"]},
        "tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},
        "required":["unit","tags"],"additionalProperties":false})",
};

std::shared_ptr<const Grammar> tool_grammar() {
  const nlohmann::ordered_json params = nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"city":{"enum":["Paris","Lyon"]},
          "unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],
          "additionalProperties":false})");
  auto g = toolcall::forced_calls_grammar(
      toolcall::Format::Hermes,
      toolcall::ForcedCalls{{{"get_weather", params}, {"get_time", nullptr}}, false});
  EXPECT_TRUE(g.ok()) << g.message();
  return g.ok() ? *g : nullptr;
}

// The finite entries of the mask on zeros.
std::vector<int32_t> finite(GrammarConstraint& c, int32_t n_vocab) {
  std::vector<float> l(size_t(n_vocab), 0.0f);
  c.mask(l);
  std::vector<int32_t> out;
  for (int32_t t = 0; t < n_vocab; ++t)
    if (std::isfinite(l[size_t(t)])) out.push_back(t);
  return out;
}

// The reference run after `history` (see the file's comment).
ForcedRun reference(const std::shared_ptr<const CompiledGrammar>& cg,
                    const std::vector<int32_t>& history, int max, bool guess_text) {
  const TokenTrie& trie = cg->trie();
  GrammarConstraint r(cg);
  for (int32_t t : history) EXPECT_TRUE(r.accept(t).ok());
  ForcedRun run;
  bool guessed = false;
  while (int(run.tokens.size()) < max && !r.ended()) {
    const std::vector<int32_t> f = finite(r, trie.n_vocab());
    int32_t next = -1;
    bool eog = false;
    for (int32_t t : f) eog = eog || trie.is_eog(t);
    if (eog || f.empty()) break;
    if (f.size() == 1) {
      next = f[0];
    } else if (guess_text && f.size() <= 64) {
      next = f[0];
      for (int32_t t : f)
        if (trie.bytes(t).size() > trie.bytes(next).size()) next = t;
      bool one_text = true;
      for (int32_t t : f) one_text = one_text && trie.bytes(next).starts_with(trie.bytes(t));
      if (!one_text) next = -1;
    }
    if (next < 0) break;
    run.sure += f.size() == 1 && !guessed;
    guessed = guessed || f.size() != 1;
    run.tokens.push_back(next);
    EXPECT_TRUE(r.accept(next).ok());
  }
  return run;
}

struct Tally {
  int steps = 0, sure = 0, guessed = 0;
};

// Random generations (uniform over the mask) on g: at every step, forced() against the
// reference, with and without guess_text, and the mask unchanged by the walks.
Tally check_walks(const std::shared_ptr<const Grammar>& g,
                  const std::shared_ptr<const TokenTrie>& v, int runs) {
  auto cg = std::make_shared<const CompiledGrammar>(g, v);
  std::mt19937 rng(3);
  Tally tally;
  for (int run = 0; run < runs; ++run) {
    GrammarConstraint c(cg);
    std::vector<int32_t> history;
    for (int step = 0; step < 80 && !c.ended(); ++step) {
      const std::vector<int32_t> before = finite(c, v->n_vocab());
      for (bool guess : {false, true}) {
        const ForcedRun got = c.forced(6, guess), want = reference(cg, history, 6, guess);
        EXPECT_EQ(got.tokens, want.tokens) << "step " << step << " guess " << guess;
        EXPECT_EQ(got.sure, want.sure) << "step " << step << " guess " << guess;
        EXPECT_EQ(finite(c, v->n_vocab()), before) << "the walk moved the state";
        if (!guess) tally.sure += got.sure;
        if (guess) tally.guessed += int(got.tokens.size()) - got.sure;
      }
      ++tally.steps;
      if (before.empty()) break;
      const int32_t t = before[std::uniform_int_distribution<size_t>(0, before.size() - 1)(rng)];
      EXPECT_TRUE(c.accept(t).ok());
      history.push_back(t);
    }
  }
  return tally;
}

TEST(ForcedRun, MatchesTheBruteForceReferenceOnSchemasWithEnumsAndRequiredKeys) {
  const auto v = vocab();
  Tally all;
  for (const char* schema : kSchemas) {
    const Tally t = check_walks(grammar_test::schema_grammar(schema), v, 6);
    all.steps += t.steps, all.sure += t.sure, all.guessed += t.guessed;
  }
  // Not vacuous: both kinds of run were met, and often.
  EXPECT_GT(all.sure, all.steps / 4) << all.steps << " steps";
  EXPECT_GT(all.guessed, 10);
}

TEST(ForcedRun, MatchesTheBruteForceReferenceOnAForcedToolCall) {
  const Tally t = check_walks(tool_grammar(), vocab(), 6);
  EXPECT_GT(t.sure, t.steps / 4) << t.steps << " steps";
}

// A lazily started grammar forces nothing before its trigger, then what its grammar forces.
TEST(ForcedRun, ATriggeredConstraintForcesOnlyAfterItsTrigger) {
  const auto v = vocab();
  auto cg = std::make_shared<const CompiledGrammar>(tool_grammar(), v);
  TriggeredConstraint c(cg, "<tool_call>");
  GrammarConstraint plain(cg);
  const auto id = [&](std::string_view bytes) {
    for (int32_t t = 0; t < v->n_vocab(); ++t)
      if (v->bytes(t) == bytes) return t;
    return int32_t(-1);
  };
  for (char ch : std::string("Sure: ")) ASSERT_TRUE(c.accept(id(std::string(1, ch))).ok());
  EXPECT_TRUE(c.forced(8).tokens.empty());
  ASSERT_TRUE(c.accept(id("<tool_call>")).ok());
  ASSERT_TRUE(plain.accept(id("<tool_call>")).ok());
  const ForcedRun got = c.forced(8), want = plain.forced(8);
  EXPECT_FALSE(got.tokens.empty());
  EXPECT_EQ(got.tokens, want.tokens);
}

}  // namespace
}  // namespace kamera::grammar
