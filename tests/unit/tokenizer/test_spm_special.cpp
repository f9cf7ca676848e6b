// SentencePiece vocabularies with special tokens written in the text, against llama.cpp d32676d's
// llama_tokenize on the same files: tests/data/phi3/phi3_tiny.gguf (a SentencePiece vocabulary
// with Phi-3's control tokens <|user|>, <|assistant|>, <|end|>, ..., written by llama.cpp's
// gguf-py; its name says phi3, so llama.cpp strips the whitespace after its special tokens) and the
// real stories260K.gguf (../shared/models; <unk>, <s>, </s> are its special tokens). The ids were
// printed by a throwaway program against libllama (llama_model_load_from_file with vocab_only,
// then llama_tokenize(vocab, text, add_special, parse_special)); its recipe is in
// tests/data/phi3/README.md. Before the fix SentencePiece ignored parse_special: <|user|> was
// eight characters.
#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/gguf.h"
#include "support/paths.h"
#include "tokenizer/gguf_import.h"
#include "tokenizer/tokenizer.h"

namespace kamera {
namespace {

struct Case {
  const char* model;  // "phi3" or "stories"
  const char* text;
  bool parse_special, add_special;
  std::vector<int32_t> ids;  // llama.cpp's
};

const Case kCases[] = {
    {"phi3",
     "<|user|>\nHello<|end|>\n<|assistant|>\n",
     true,
     false,
     {297, 229, 153, 132, 75, 104, 111, 111, 114, 299, 298}},
    {"phi3",
     "<|user|>\nHello<|end|>\n<|assistant|>\n",
     true,
     true,
     {1, 297, 229, 153, 132, 75, 104, 111, 111, 114, 299, 298}},
    {"phi3",
     "<|user|>\nHello<|end|>\n<|assistant|>\n",
     false,
     false,
     {229, 153, 132, 63,  127, 120, 118, 104, 117, 127, 65,  13, 75,
      104, 111, 111, 114, 63,  127, 104, 113, 103, 127, 65,  13, 63,
      127, 100, 118, 118, 108, 118, 119, 100, 113, 119, 127, 65, 13}},
    {"phi3",
     "<|user|>\nHello<|end|>\n<|assistant|>\n",
     false,
     true,
     {1,   229, 153, 132, 63,  127, 120, 118, 104, 117, 127, 65, 13, 75,
      104, 111, 111, 114, 63,  127, 104, 113, 103, 127, 65,  13, 63, 127,
      100, 118, 118, 108, 118, 119, 100, 113, 119, 127, 65,  13}},
    {"phi3",
     "<|system|>\nBe brief.<|end|>\n<|user|>\n  two  spaces<|end|>\n<|assistant|>\n",
     true,
     false,
     {296, 229, 153, 132, 69,  104, 229, 153, 132, 101, 117, 108, 104, 105, 49,  299, 297, 229, 153,
      132, 119, 122, 114, 229, 153, 132, 229, 153, 132, 118, 115, 100, 102, 104, 118, 299, 298}},
    {"phi3",
     "<|system|>\nBe brief.<|end|>\n<|user|>\n  two  spaces<|end|>\n<|assistant|>\n",
     true,
     true,
     {1,   296, 229, 153, 132, 69,  104, 229, 153, 132, 101, 117, 108,
      104, 105, 49,  299, 297, 229, 153, 132, 119, 122, 114, 229, 153,
      132, 229, 153, 132, 118, 115, 100, 102, 104, 118, 299, 298}},
    {"phi3",
     "<|system|>\nBe brief.<|end|>\n<|user|>\n  two  spaces<|end|>\n<|assistant|>\n",
     false,
     false,
     {229, 153, 132, 63,  127, 118, 124, 118, 119, 104, 112, 127, 65,  13,  69,  104, 229,
      153, 132, 101, 117, 108, 104, 105, 49,  63,  127, 104, 113, 103, 127, 65,  13,  63,
      127, 120, 118, 104, 117, 127, 65,  13,  229, 153, 132, 229, 153, 132, 119, 122, 114,
      229, 153, 132, 229, 153, 132, 118, 115, 100, 102, 104, 118, 63,  127, 104, 113, 103,
      127, 65,  13,  63,  127, 100, 118, 118, 108, 118, 119, 100, 113, 119, 127, 65,  13}},
    {"phi3",
     "<|system|>\nBe brief.<|end|>\n<|user|>\n  two  spaces<|end|>\n<|assistant|>\n",
     false,
     true,
     {1,   229, 153, 132, 63,  127, 118, 124, 118, 119, 104, 112, 127, 65,  13,  69,  104, 229,
      153, 132, 101, 117, 108, 104, 105, 49,  63,  127, 104, 113, 103, 127, 65,  13,  63,  127,
      120, 118, 104, 117, 127, 65,  13,  229, 153, 132, 229, 153, 132, 119, 122, 114, 229, 153,
      132, 229, 153, 132, 118, 115, 100, 102, 104, 118, 63,  127, 104, 113, 103, 127, 65,  13,
      63,  127, 100, 118, 118, 108, 118, 119, 100, 113, 119, 127, 65,  13}},
    {"phi3", "x<unk> <s>y</s>\n<|endoftext|> z", true, false, {229, 153, 132, 123, 0,   229, 153,
                                                               132, 229, 153, 132, 1,   229, 153,
                                                               132, 124, 2,   295, 229, 153, 132,
                                                               229, 153, 132, 125}},
    {"phi3", "x<unk> <s>y</s>\n<|endoftext|> z", true, true, {1,   229, 153, 132, 123, 0,   229,
                                                              153, 132, 229, 153, 132, 1,   229,
                                                              153, 132, 124, 2,   295, 229, 153,
                                                              132, 229, 153, 132, 125}},
    {"phi3", "x<unk> <s>y</s>\n<|endoftext|> z", false, false, {229, 153, 132, 123, 63,  120, 113,
                                                                110, 65,  229, 153, 132, 63,  118,
                                                                65,  124, 63,  50,  118, 65,  13,
                                                                63,  127, 104, 113, 103, 114, 105,
                                                                119, 104, 123, 119, 127, 65,  229,
                                                                153, 132, 125}},
    {"phi3", "x<unk> <s>y</s>\n<|endoftext|> z", false, true, {1,   229, 153, 132, 123, 63,  120,
                                                               113, 110, 65,  229, 153, 132, 63,
                                                               118, 65,  124, 63,  50,  118, 65,
                                                               13,  63,  127, 104, 113, 103, 114,
                                                               105, 119, 104, 123, 119, 127, 65,
                                                               229, 153, 132, 125}},
    {"phi3", "plain text, no tokens", true, false, {229, 153, 132, 115, 111, 100, 108, 113,
                                                    229, 153, 132, 119, 104, 123, 119, 47,
                                                    229, 153, 132, 113, 114, 229, 153, 132,
                                                    119, 114, 110, 104, 113, 118}},
    {"phi3", "plain text, no tokens", true, true, {1,   229, 153, 132, 115, 111, 100, 108,
                                                   113, 229, 153, 132, 119, 104, 123, 119,
                                                   47,  229, 153, 132, 113, 114, 229, 153,
                                                   132, 119, 114, 110, 104, 113, 118}},
    {"phi3", "plain text, no tokens", false, false, {229, 153, 132, 115, 111, 100, 108, 113,
                                                     229, 153, 132, 119, 104, 123, 119, 47,
                                                     229, 153, 132, 113, 114, 229, 153, 132,
                                                     119, 114, 110, 104, 113, 118}},
    {"phi3", "plain text, no tokens", false, true, {1,   229, 153, 132, 115, 111, 100, 108,
                                                    113, 229, 153, 132, 119, 104, 123, 119,
                                                    47,  229, 153, 132, 113, 114, 229, 153,
                                                    132, 119, 114, 110, 104, 113, 118}},
    {"stories",
     "<|user|>\nHello<|end|>\n<|assistant|>\n",
     true,
     false,
     {410, 504, 506, 425, 419, 285, 506, 505, 13,  440, 411, 306, 414, 504, 506, 367,
      506, 505, 13,  504, 506, 412, 419, 419, 293, 413, 303, 413, 506, 505, 13}},
    {"stories",
     "<|user|>\nHello<|end|>\n<|assistant|>\n",
     true,
     true,
     {1,   410, 504, 506, 425, 419, 285, 506, 505, 13,  440, 411, 306, 414, 504, 506,
      367, 506, 505, 13,  504, 506, 412, 419, 419, 293, 413, 303, 413, 506, 505, 13}},
    {"stories",
     "<|user|>\nHello<|end|>\n<|assistant|>\n",
     false,
     false,
     {410, 504, 506, 425, 419, 285, 506, 505, 13,  440, 411, 306, 414, 504, 506, 367,
      506, 505, 13,  504, 506, 412, 419, 419, 293, 413, 303, 413, 506, 505, 13}},
    {"stories",
     "<|user|>\nHello<|end|>\n<|assistant|>\n",
     false,
     true,
     {1,   410, 504, 506, 425, 419, 285, 506, 505, 13,  440, 411, 306, 414, 504, 506,
      367, 506, 505, 13,  504, 506, 412, 419, 419, 293, 413, 303, 413, 506, 505, 13}},
    {"stories",
     "<|system|>\nBe brief.<|end|>\n<|user|>\n  two  spaces<|end|>\n<|assistant|>\n",
     true,
     false,
     {410, 504, 506, 419, 422, 356, 411, 423, 506, 505, 13,  445, 411, 268, 325,
      411, 431, 426, 504, 506, 367, 506, 505, 13,  504, 506, 425, 419, 285, 506,
      505, 13,  410, 259, 424, 414, 410, 262, 427, 412, 331, 419, 504, 506, 367,
      506, 505, 13,  504, 506, 412, 419, 419, 293, 413, 303, 413, 506, 505, 13}},
    {"stories",
     "<|system|>\nBe brief.<|end|>\n<|user|>\n  two  spaces<|end|>\n<|assistant|>\n",
     true,
     true,
     {1,   410, 504, 506, 419, 422, 356, 411, 423, 506, 505, 13,  445, 411, 268, 325,
      411, 431, 426, 504, 506, 367, 506, 505, 13,  504, 506, 425, 419, 285, 506, 505,
      13,  410, 259, 424, 414, 410, 262, 427, 412, 331, 419, 504, 506, 367, 506, 505,
      13,  504, 506, 412, 419, 419, 293, 413, 303, 413, 506, 505, 13}},
    {"stories",
     "<|system|>\nBe brief.<|end|>\n<|user|>\n  two  spaces<|end|>\n<|assistant|>\n",
     false,
     false,
     {410, 504, 506, 419, 422, 356, 411, 423, 506, 505, 13,  445, 411, 268, 325,
      411, 431, 426, 504, 506, 367, 506, 505, 13,  504, 506, 425, 419, 285, 506,
      505, 13,  410, 259, 424, 414, 410, 262, 427, 412, 331, 419, 504, 506, 367,
      506, 505, 13,  504, 506, 412, 419, 419, 293, 413, 303, 413, 506, 505, 13}},
    {"stories",
     "<|system|>\nBe brief.<|end|>\n<|user|>\n  two  spaces<|end|>\n<|assistant|>\n",
     false,
     true,
     {1,   410, 504, 506, 419, 422, 356, 411, 423, 506, 505, 13,  445, 411, 268, 325,
      411, 431, 426, 504, 506, 367, 506, 505, 13,  504, 506, 425, 419, 285, 506, 505,
      13,  410, 259, 424, 414, 410, 262, 427, 412, 331, 419, 504, 506, 367, 506, 505,
      13,  504, 506, 412, 419, 419, 293, 413, 303, 413, 506, 505, 13}},
    {"stories", "x<unk> <s>y</s>\n<|endoftext|> z", true, false, {410, 444, 0,   410, 410, 1,
                                                                  348, 2,   410, 13,  504, 506,
                                                                  367, 414, 431, 413, 411, 444,
                                                                  413, 506, 505, 410, 451}},
    {"stories", "x<unk> <s>y</s>\n<|endoftext|> z", true, true, {1,   410, 444, 0,   410, 410,
                                                                 1,   348, 2,   410, 13,  504,
                                                                 506, 367, 414, 431, 413, 411,
                                                                 444, 413, 506, 505, 410, 451}},
    {"stories", "x<unk> <s>y</s>\n<|endoftext|> z", false, false, {410, 444, 504, 379, 433, 505,
                                                                   410, 504, 419, 505, 422, 504,
                                                                   492, 419, 505, 13,  504, 506,
                                                                   367, 414, 431, 413, 411, 444,
                                                                   413, 506, 505, 410, 451}},
    {"stories", "x<unk> <s>y</s>\n<|endoftext|> z", false, true, {1,   410, 444, 504, 379, 433,
                                                                  505, 410, 504, 419, 505, 422,
                                                                  504, 492, 419, 505, 13,  504,
                                                                  506, 367, 414, 431, 413, 411,
                                                                  444, 413, 506, 505, 410, 451}},
    {"stories",
     "plain text, no tokens",
     true,
     false,
     {324, 412, 271, 259, 411, 444, 413, 432, 297, 414, 267, 433, 302, 419}},
    {"stories",
     "plain text, no tokens",
     true,
     true,
     {1, 324, 412, 271, 259, 411, 444, 413, 432, 297, 414, 267, 433, 302, 419}},
    {"stories",
     "plain text, no tokens",
     false,
     false,
     {324, 412, 271, 259, 411, 444, 413, 432, 297, 414, 267, 433, 302, 419}},
    {"stories",
     "plain text, no tokens",
     false,
     true,
     {1, 324, 412, 271, 259, 411, 444, 413, 432, 297, 414, 267, 433, 302, 419}},
};

std::string path_of(const std::string& model) {
  if (model == "phi3") return std::string(KAMERA_SOURCE_DIR) + "/tests/data/phi3/phi3_tiny.gguf";
  return test_paths::stories_dir() + "/stories260K.gguf";
}

Tokenizer load(const std::string& path) {
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << f.message();
  auto t = tokenizer_from_gguf(**f);
  EXPECT_TRUE(t.ok()) << t.message();
  return std::move(t.value());
}

TEST(SpmSpecialTokens, TokenizeLikeLlamaCpp) {
  REQUIRE_MODEL_FILE(path_of("stories"));
  const Tokenizer phi3 = load(path_of("phi3")), stories = load(path_of("stories"));
  EXPECT_EQ(phi3.kind(), VocabKind::Spm);
  EXPECT_TRUE(phi3.vocab().rstrip_special);
  EXPECT_FALSE(stories.vocab().rstrip_special);
  for (const Case& c : kCases) {
    const Tokenizer& t = std::string(c.model) == "phi3" ? phi3 : stories;
    const auto got =
        t.tokenize(c.text, {.add_special = c.add_special, .parse_special = c.parse_special});
    EXPECT_EQ(got, c.ids) << c.model << " parse_special=" << c.parse_special
                          << " add_special=" << c.add_special << ": " << c.text;
  }
}

// The server's path: control tokens read only inside the ranges a chat template wrote; a range
// may hold several of them with text between (what the template writes around a message).
TEST(SpmSpecialTokens, ControlTokensOnlyInsideMarkedRanges) {
  const Tokenizer phi3 = load(path_of("phi3"));
  const std::string text = "<|user|>\nHi<|end|>\n<|assistant|>\n";
  const TextRange all{0, text.size()};
  EXPECT_EQ(phi3.encode_marked(text, {&all, 1}, true),
            phi3.tokenize(text, {.add_special = false, .parse_special = true}));
  // "Hi<|end|>" from a client (outside the ranges) stays text
  const std::string injected = "<|user|>\nHi<|end|>";
  const TextRange head{0, 9};
  const auto ids = phi3.encode_marked(injected, {&head, 1}, true);
  EXPECT_EQ(ids.front(), 297);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 299), 0);
}

}  // namespace
}  // namespace kamera
