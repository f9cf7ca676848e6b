// Constrained generation on a model with random weights (a tiny synthetic qwen2 with its
// SentencePiece vocabulary): every document the engine's logits, masked by the constraint,
// complete into validates against its schema (Python's jsonschema), for several schemas.
#include <gtest/gtest.h>

#include <random>

#include "grammar/constraint.h"
#include "support/jsonschema_oracle.h"
#include "support/tiny_models.h"
#include "unit/grammar/grammar_util.h"

namespace kamera::grammar {
namespace {

using ojson = nlohmann::ordered_json;

const char* kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":10},
        "age":{"type":"integer","minimum":0,"maximum":150},
        "role":{"enum":["admin","editor","viewer"]},"active":{"type":"boolean"},
        "tags":{"type":"array","items":{"type":"string","maxLength":5},"maxItems":2}},
        "required":["name","age","role"],"additionalProperties":false})",
    R"({"type":"array","items":{"anyOf":[{"type":"number","minimum":-1,"maximum":1},
        {"type":"null"}]},"minItems":1,"maxItems":4})",
    R"({"type":"string","minLength":3,"maxLength":8})",
};

TEST(ConstrainedModel, RandomWeightsAlwaysWriteValidDocuments) {
  auto ctx = tiny::context(tiny::model_path("qwen2"), 512);
  ASSERT_TRUE(ctx);
  const Tokenizer& tok = *ctx->model().tokenizer;
  auto trie = TokenTrie::from_tokenizer(tok);
  std::mt19937 rng(1);
  std::vector<oracle::SchemaDocs> batch;
  size_t docs = 0;
  for (const char* schema : kSchemas) {
    auto g = grammar_test::schema_grammar(schema);
    ASSERT_TRUE(g);
    auto cg = std::make_shared<const CompiledGrammar>(g, trie);
    oracle::SchemaDocs sd{ojson::parse(schema), {}};
    for (int run = 0; run < 4; ++run) {
      KvPool& pool = ctx->pool();
      const SeqId seq = pool.create_sequence();
      std::vector<int32_t> prompt = tok.encode("Once upon a time", true);
      auto logits = ctx->engine().forward(
          pool, seq, ForwardInput::from_tokens(prompt, tiny::linear_positions(int(prompt.size()))));
      ASSERT_TRUE(logits.ok()) << logits.message();
      GrammarConstraint c(cg);
      std::string text;
      for (int i = 0; i < 300 && !c.ended(); ++i) {
        std::vector<float> l = *logits;
        c.mask(l);
        const int32_t t = grammar_test::sample_masked(l, rng);
        ASSERT_TRUE(c.accept(t).ok());
        if (c.ended()) break;
        text += trie->bytes(t);
        const Pos p = Pos::linear(int32_t(prompt.size()) + i);
        logits = ctx->engine().forward(pool, seq, ForwardInput::from_tokens({&t, 1}, {&p, 1}));
        ASSERT_TRUE(logits.ok()) << logits.message();
      }
      pool.free_sequence(seq);
      ASSERT_TRUE(c.ended()) << schema << "\nunfinished: " << text;
      sd.docs.push_back(text);
      ++docs;
    }
    batch.push_back(std::move(sd));
  }
  EXPECT_EQ(docs, 12u);
  const auto verdicts = oracle::validate(batch);
  REQUIRE_ORACLE(verdicts);
  for (size_t i = 0; i < batch.size(); ++i)
    for (size_t j = 0; j < batch[i].docs.size(); ++j)
      EXPECT_TRUE((*verdicts)[i][j]) << kSchemas[i] << "\nthe model wrote " << batch[i].docs[j];
}

}  // namespace
}  // namespace kamera::grammar
