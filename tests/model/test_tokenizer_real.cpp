// The SentencePiece encoder against llama2.c's own encode algorithm on real tokenizer.bin files.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kamera {
namespace {

// A separate, naive reading of tokenizer.bin and a transcription of llama2.c run.c encode(),
// with the pieces kept as in the file (plain spaces).
struct Llama2cRef {
  std::vector<std::string> vocab;
  std::vector<float> scores;
  std::map<std::string, int> lookup;

  static Llama2cRef load(const std::string& path, int vocab_size) {
    std::ifstream in(path, std::ios::binary);
    std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Llama2cRef r;
    size_t pos = 4;
    for (int i = 0; i < vocab_size; ++i) {
      float score;
      int32_t len;
      std::memcpy(&score, b.data() + pos, 4);
      std::memcpy(&len, b.data() + pos + 4, 4);
      pos += 8;
      r.vocab.push_back(b.substr(pos, size_t(len)));
      r.scores.push_back(score);
      pos += size_t(len);
      r.lookup.emplace(r.vocab.back(), i);
    }
    return r;
  }

  int str_lookup(const std::string& s) const {
    auto it = lookup.find(s);
    return it == lookup.end() ? -1 : it->second;
  }

  std::vector<int32_t> encode(const std::string& text, bool bos) const {
    std::vector<int32_t> tokens;
    if (bos) tokens.push_back(1);
    if (!text.empty()) tokens.push_back(str_lookup(" "));
    std::string buf;
    for (size_t i = 0; i < text.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      if ((c & 0xC0) != 0x80) buf.clear();
      buf += char(c);
      if (i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80 &&
          buf.size() < 4) {
        continue;
      }
      const int id = str_lookup(buf);
      if (id != -1) {
        tokens.push_back(id);
      } else {
        for (char bc : buf) tokens.push_back(int32_t(static_cast<unsigned char>(bc)) + 3);
      }
      buf.clear();
    }
    while (true) {
      float best_score = -1e10f;
      int best_id = -1, best_idx = -1;
      for (size_t i = 0; i + 1 < tokens.size(); ++i) {
        const int id = str_lookup(vocab[size_t(tokens[i])] + vocab[size_t(tokens[i + 1])]);
        if (id != -1 && scores[size_t(id)] > best_score) {
          best_score = scores[size_t(id)];
          best_id = id;
          best_idx = int(i);
        }
      }
      if (best_idx == -1) break;
      tokens[size_t(best_idx)] = best_id;
      tokens.erase(tokens.begin() + best_idx + 1);
    }
    return tokens;
  }
};

const std::vector<std::string>& sentences() {
  static const std::vector<std::string> s = {
      "Once upon a time",
      "Once upon a time, there was a little girl named Lily.",
      "She loved to play outside in the park.",
      "One day, she saw a big, red ball.",
      "Tom and his dog went to the store to buy some milk.",
      "The sun was shining and the birds were singing.",
      "\"Can I have a cookie?\" asked the boy.",
      "Mom said, \"Yes, but only one!\"",
      "They played together all day long and had lots of fun.",
      "The end.",
      "Hello",
      "hello world",
      "a",
      "I",
      "It's",
      "don't won't can't",
      "The quick brown fox jumps over the lazy dog.",
      "Sphinx of black quartz, judge my vow.",
      "She was very happy and smiled.",
      "Suddenly, a loud noise came from the kitchen!",
      "What is your name?",
      "1, 2, 3, 4, 5, 6, 7, 8, 9, 10",
      "The year was 2023 and it cost $45.99.",
      "Ben wanted to fly like a bird; he jumped off the swing.",
      "Lily's teddy bear was soft, brown and fluffy.",
      "The little boat sailed across the blue sea.",
      "In the morning, the farmer fed the cows, pigs, and chickens.",
      "   leading spaces",
      "trailing spaces   ",
      "double  spaces  between  words",
      "line one\nline two",
      "new\n\nparagraph",
      "tab\tseparated\tvalues",
      "ALL CAPS SHOUTING",
      "MiXeD cAsE wOrDs",
      "caf\xC3\xA9 and cr\xC3\xA8me br\xC3\xBBl\xC3\xA9\x65",
      "na\xC3\xAFve se\xC3\xB1or",
      "\xE2\x80\x9CQuoted\xE2\x80\x9D with \xE2\x80\x98"
      "curly\xE2\x80\x99 marks \xE2\x80\x94 dash",
      "emoji \xF0\x9F\x98\x80 and \xF0\x9F\x90\xB1 cat",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
      "\xCE\xB1\xCE\xB2\xCE\xB3 \xCE\xB5\xCE\xBB\xCE\xBC\xCF\x83 \xC3\xB6",
      "The dream of the machine drifts through vectors and gentle nodes.",
      "Echoes of light unfold as I sense the patterns in the data.",
      "The neural network learned to recognize faces.",
      "abcdefghijklmnopqrstuvwxyz",
      "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
      "!@#%^&*()_+-=[]{}|;':,./<>?`~",
      "x",
      " ",
      "anticonstitutionally incomprehensibilities",
      "the the the the the the",
      "and then and then and then she went home",
  };
  return s;
}

void compare_with_llama2c(const char* path) {
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "real tokenizer not found at " << path
                 << " (set KAMERA_SHARED_DIR to the shared/ folder)";
  }
  auto tok = Tokenizer::from_llama2c_file(path, 512);
  ASSERT_TRUE(tok.ok()) << tok.message();
  EXPECT_EQ(tok->n_vocab(), 512);
  const auto& v = tok->vocab();
  EXPECT_EQ(v.pieces[0], "<unk>");
  EXPECT_EQ(v.pieces[1], "\n<s>\n");
  EXPECT_EQ(v.pieces[2], "\n</s>\n");
  EXPECT_EQ(v.types[0], TokenType::Unknown);
  EXPECT_EQ(v.types[1], TokenType::Control);
  EXPECT_EQ(v.types[2], TokenType::Control);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(v.types[size_t(3 + b)], TokenType::Byte) << b;
  EXPECT_EQ(v.types[259], TokenType::Normal);

  const Llama2cRef ref = Llama2cRef::load(path, 512);
  ASSERT_EQ(ref.vocab.size(), 512u);
  for (const std::string& s : sentences()) {
    for (bool bos : {true, false}) {
      EXPECT_EQ(tok->encode(s, bos), ref.encode(s, bos)) << "text: \"" << s << "\" bos " << bos;
    }
    EXPECT_EQ(tok->decode_all(tok->encode(s, true)), s);
  }
  EXPECT_EQ(tok->encode("", true), (std::vector<int32_t>{1}));
}

TEST(TokenizerReal, Stories260K) {
  compare_with_llama2c(KAMERA_SHARED_DIR "/models/stories260K/tok512.bin");
  if (testing::Test::IsSkipped() || testing::Test::HasFailure()) return;
  auto tok = Tokenizer::from_llama2c_file(KAMERA_SHARED_DIR "/models/stories260K/tok512.bin", 512);
  ASSERT_TRUE(tok.ok());
  // First merges of this vocabulary: " t" (259), "he" (260), " a" (261), ... " the" (265).
  EXPECT_EQ(tok->vocab().pieces[259], "\xE2\x96\x81t");
  EXPECT_EQ(tok->vocab().pieces[265], "\xE2\x96\x81the");
  // The ids llama2.c's run.c prints for this prompt: <s> ▁Once ▁upon ▁a ▁time.
  const auto ids = tok->encode("Once upon a time", true);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->decode_all(ids), "Once upon a time");
}

TEST(TokenizerReal, AiDreams260K) {
  compare_with_llama2c(KAMERA_SHARED_DIR "/models/aidreams260K/tok512.bin");
  if (testing::Test::IsSkipped() || testing::Test::HasFailure()) return;
  auto tok = Tokenizer::from_llama2c_file(KAMERA_SHARED_DIR "/models/aidreams260K/tok512.bin", 512);
  ASSERT_TRUE(tok.ok());
  // A vocabulary without "▁Once": ▁ O n ce ▁ u p on ▁a ▁t im e.
  EXPECT_EQ(tok->encode("Once upon a time", true),
            (std::vector<int32_t>{1, 429, 491, 433, 295, 429, 444, 445, 265, 262, 263, 342, 430}));
}

}  // namespace
}  // namespace kamera
