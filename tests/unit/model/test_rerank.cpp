// The reranker file make-model --reranker writes and the loader's reading of it (model/rerank.h):
// the keys llama.cpp's converter writes for Qwen3-Reranker (checked by name in the file, not by
// kamera's reading), cls.output = the rows of the LM head of "yes" and "no" (checked against the
// head of the same seed's plain file), an untied lm_head dropped as the converter drops it, and a
// plain file read as no reranker with the reason.
#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/rerank.h"
#include "support/tiny_models.h"
#include "synthetic/synthetic_model.h"

using namespace kamera;

namespace {

std::string write_model(bool reranker, bool tied, const std::string& name) {
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(Arch::Qwen3, "tiny");
  spec.cfg.tied_output = tied;
  spec.seed = 5;
  spec.reranker = reranker;
  const std::string path = testing::TempDir() + "kamera-rerank-" + name + ".gguf";
  auto st = write_synthetic_gguf(spec, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

int32_t piece_id(const Model& m, const std::string& piece) {
  const auto& p = m.tokenizer->vocab().pieces;
  const auto it = std::find(p.begin(), p.end(), piece);
  return it == p.end() ? -1 : int32_t(it - p.begin());
}

std::vector<float> row(const Weight& w, int64_t r) {
  std::vector<float> out(size_t(w.cols()));
  w.rows_f32(r, 1, out.data());
  return out;
}

}  // namespace

TEST(Rerank, MakeModelWritesTheConvertersKeys) {
  const std::string path = write_model(true, true, "keys");
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->get_int("qwen3.pooling_type"), 4);
  const auto* labels = (*f)->get_string_array("qwen3.classifier.output_labels");
  ASSERT_NE(labels, nullptr);
  EXPECT_EQ(*labels, (std::vector<std::string>{"yes", "no"}));
  const auto* names = (*f)->get_string_array("tokenizer.chat_templates");
  ASSERT_NE(names, nullptr);
  EXPECT_EQ(*names, std::vector<std::string>{"rerank"});
  const auto prompt = (*f)->get_string("tokenizer.chat_template.rerank");
  ASSERT_TRUE(prompt.has_value());
  for (const char* part : {"{query}", "{document}", "<Instruct>: ", "\n<Query>: ", "\n<Document>: ",
                           "<|im_start|>assistant\n<think>\n\n</think>\n\n"})
    EXPECT_NE(prompt->find(part), std::string::npos) << part;
  const GgufTensor* cls = (*f)->find_tensor("cls.output.weight");
  ASSERT_NE(cls, nullptr);
  EXPECT_EQ(cls->ne, (std::vector<int64_t>{64, 2}));
}

TEST(Rerank, TheHeadIsTheLmHeadsRowsOfYesAndNo) {
  for (bool tied : {true, false}) {
    auto plain = tiny::load(write_model(false, tied, tied ? "plain-tied" : "plain-untied"));
    const std::string path = write_model(true, tied, tied ? "tied" : "untied");
    auto m = tiny::load(path);  // the loader accepts cls.output
    ASSERT_TRUE(plain && m);
    auto info = read_rerank_file(path);
    ASSERT_TRUE(info.ok()) << info.message();
    ASSERT_TRUE(info->head.has_value()) << info->why_not;
    const RerankHead& h = *info->head;
    EXPECT_EQ(h.n_out, 2);
    EXPECT_EQ(h.labels, (std::vector<std::string>{"yes", "no"}));
    const int32_t yes = piece_id(*m, "yes"), no = piece_id(*m, "no");
    ASSERT_GE(yes, 0);
    ASSERT_GE(no, 0);
    // the same seed's plain file holds the head the rows were taken from
    const std::vector<float> want_yes = row(plain->output_weight(), yes);
    const std::vector<float> want_no = row(plain->output_weight(), no);
    EXPECT_EQ(std::vector<float>(h.rows.begin(), h.rows.begin() + 64), want_yes) << tied;
    EXPECT_EQ(std::vector<float>(h.rows.begin() + 64, h.rows.end()), want_no) << tied;
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ((*f)->find_tensor("output.weight"), nullptr) << "the converter drops lm_head";
  }
}

TEST(Rerank, APlainModelIsNoRerankerAndSaysWhy) {
  auto info = read_rerank_file(write_model(false, true, "plain"));
  ASSERT_TRUE(info.ok()) << info.message();
  EXPECT_FALSE(info->head.has_value());
  EXPECT_NE(info->why_not.find("pooling type is 0 (none)"), std::string::npos) << info->why_not;
}
