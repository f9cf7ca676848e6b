// Byte-level BPE: the byte map, merges against a naive string-based reference, pre-tokenizer
// splitting, added tokens, NFC, the GGUF round trip, the tokenizer.json importer and the UTF-8
// stream. No external files (the real vocabularies are in tests/model/test_bpe_real.cpp).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "support/temp_path.h"
#include "tokenizer/bpe.h"
#include "tokenizer/gguf_import.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace kamera {
namespace {

// A byte-level vocabulary: the 256 byte pieces (id = byte), then `extra` pieces made by merges.
struct ToyBpe {
  Tokenizer::Vocab v;
  std::map<std::pair<std::string, std::string>, int> rank;  // for the naive reference

  ToyBpe() {
    v.kind = VocabKind::Bpe;
    v.pre = "gpt2";
    v.bos = v.eos = v.unk = -1;
    for (int b = 0; b < 256; ++b) v.pieces.push_back(gpt2_byte_char(uint8_t(b)));
    v.types.assign(256, TokenType::Normal);
  }
  std::string mapped(const std::string& raw) const {
    std::string s;
    for (char c : raw) s += gpt2_byte_char(uint8_t(c));
    return s;
  }
  // Adds the merge (a, b) of two existing pieces (raw bytes); the merged piece if new.
  void merge(const std::string& a, const std::string& b) {
    const std::string ma = mapped(a), mb = mapped(b);
    if (rank.count({ma, mb})) return;
    rank[{ma, mb}] = int(v.merges.size());
    v.merges.push_back(ma + " " + mb);
    if (std::find(v.pieces.begin(), v.pieces.end(), ma + mb) == v.pieces.end()) {
      v.pieces.push_back(ma + mb);
      v.types.push_back(TokenType::Normal);
    }
  }
  void add(const std::string& text, TokenType t) {
    v.pieces.push_back(text);
    v.types.push_back(t);
  }
  // Naive BPE on one word: strings, the lowest-ranked adjacent pair (leftmost) merged one at a
  // time until no pair has a rank.
  std::vector<int32_t> naive(const std::string& raw) const {
    std::vector<std::string> syms;
    for (char c : raw) syms.push_back(gpt2_byte_char(uint8_t(c)));
    while (syms.size() > 1) {
      int best = -1, best_rank = INT32_MAX;
      for (size_t i = 0; i + 1 < syms.size(); ++i) {
        auto it = rank.find({syms[i], syms[i + 1]});
        if (it != rank.end() && it->second < best_rank) best = int(i), best_rank = it->second;
      }
      if (best < 0) break;
      syms[size_t(best)] += syms[size_t(best) + 1];
      syms.erase(syms.begin() + best + 1);
    }
    std::vector<int32_t> ids;
    for (const std::string& s : syms)
      ids.push_back(int32_t(std::find(v.pieces.begin(), v.pieces.end(), s) - v.pieces.begin()));
    return ids;
  }
};

TEST(BpeByteMap, IsBijectiveAndKeepsPrintables) {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string& c = gpt2_byte_char(uint8_t(b));
    EXPECT_TRUE(utf8_is_valid(c));
    seen.insert(c);
    if (b >= '!' && b <= '~') {
      EXPECT_EQ(c, std::string(1, char(b)));
    }
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(gpt2_byte_char(' '), "\xC4\xA0");   // "Ġ"
  EXPECT_EQ(gpt2_byte_char('\n'), "\xC4\x8A");  // "Ċ"
  for (int b = 0; b < 256; ++b) {
    const std::string& c = gpt2_byte_char(uint8_t(b));
    const uint32_t cp =
        c.size() == 1 ? uint8_t(c[0]) : ((uint8_t(c[0]) & 0x1F) << 6) | (uint8_t(c[1]) & 0x3F);
    EXPECT_EQ(gpt2_char_byte(cp), b);
  }
}

TEST(BpeMerge, MatchesNaiveReferenceOnRandomMergesAndWords) {
  std::mt19937 rng(7);
  ToyBpe t;
  const std::string alphabet = "abcd";
  std::vector<std::string> pool;
  for (char c : alphabet) pool.emplace_back(1, c);
  for (int i = 0; i < 60; ++i) {  // random merges of existing pieces, so ranks interleave
    const std::string a = pool[rng() % pool.size()], b = pool[rng() % pool.size()];
    if (a.size() + b.size() > 8) continue;
    t.merge(a, b);
    pool.push_back(a + b);
  }
  auto tok = Tokenizer::from_vocab(t.v);
  ASSERT_TRUE(tok.ok()) << tok.message();
  int long_words = 0;
  for (int k = 0; k < 400; ++k) {
    const size_t len = 1 + rng() % (k % 4 == 0 ? 150 : 20);  // some past the heap threshold
    std::string w;
    for (size_t i = 0; i < len; ++i) w += alphabet[rng() % alphabet.size()];
    long_words += len > 48;
    EXPECT_EQ(tok->encode_raw(w), t.naive(w)) << w;
  }
  EXPECT_GT(long_words, 20);
}

TEST(BpeMerge, IgnoreMergesKeepsAWholeVocabularyWord) {
  ToyBpe t;
  t.merge("a", "b");
  t.merge("c", "d");
  t.add(t.mapped("abcd"), TokenType::Normal);  // in the vocabulary, but no merge builds it
  const int32_t whole = int32_t(t.v.pieces.size()) - 1;
  t.v.pre = "llama3";
  auto llama3 = Tokenizer::from_vocab(t.v);
  t.v.pre = "gpt2";
  auto gpt2 = Tokenizer::from_vocab(t.v);
  ASSERT_TRUE(llama3.ok() && gpt2.ok());
  EXPECT_EQ(llama3->encode_raw("abcd"), std::vector<int32_t>{whole});
  EXPECT_EQ(gpt2->encode_raw("abcd"), t.naive("abcd"));
  EXPECT_EQ(gpt2->encode_raw("abcd").size(), 2u);
}

TEST(BpePreTokenizer, PiecesCoverTheTextForEveryName) {
  const std::vector<std::string> texts = {"Hello world's 123456 café\n\n  x",
                                          "我想在apple工作1314151天～",
                                          "a\r\nb  \t c   ",
                                          "I'VE 'll  --==  🦙🦙 3.14",
                                          "",
                                          " ",
                                          "日本語のテキスト カタカナ",
                                          "x\u00a0y\u3000z"};
  for (const std::string& name : pre_tokenizer_names()) {
    auto info = pre_tokenizer_info(name);
    ASSERT_TRUE(info.ok()) << name;
    auto pre = PreTokenizer::create(*info);
    ASSERT_TRUE(pre.ok()) << name << ": " << pre.message();
    for (const std::string& s : texts) {
      std::vector<std::string_view> pieces;
      (*pre)->split(s, pieces);
      std::string joined;
      for (std::string_view p : pieces) {
        EXPECT_FALSE(p.empty()) << name;
        joined += p;
      }
      EXPECT_EQ(joined, s) << name;
    }
  }
  EXPECT_FALSE(pre_tokenizer_info("no-such-pre").ok());
}

std::vector<std::string> split_with(const std::string& name, const std::string& s) {
  auto pre = PreTokenizer::create(*pre_tokenizer_info(name));
  std::vector<std::string_view> pieces;
  (*pre)->split(s, pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(BpePreTokenizer, SplitsAsThePatternsSay) {
  // GPT-2: contractions, a space joins the following word, whitespace before a word stays apart
  using V = std::vector<std::string>;
  EXPECT_EQ(split_with("gpt2", "Hello world's  x"), (V{"Hello", " world", "'s", " ", " x"}));
  // Qwen2 digits one at a time; Llama-3 in threes; both case-insensitive contractions
  EXPECT_EQ(split_with("qwen2", "12345"), (V{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(split_with("llama3", "12345"), (V{"123", "45"}));
  EXPECT_EQ(split_with("llama3", "WE'LL"), (V{"WE", "'LL"}));
  EXPECT_EQ(split_with("gpt2", "WE'LL"), (V{"WE", "'", "LL"}));
  // DeepSeek-V3: CJK runs apart from Latin, a punctuation mark leads the word it precedes
  EXPECT_EQ(split_with("deepseek-v3", "我想apple工作.net"), (V{"我想", "apple", "工作", ".net"}));
  // DeepSeek LLM: each digit alone, line breaks alone
  EXPECT_EQ(split_with("deepseek-llm", "ab 12\n"), (V{"ab", " ", "1", "2", "\n"}));
}

// GPT-4o / o200k (gpt-oss, Phi-4-mini): a capitalized word stands alone inside a CamelCase run,
// an upper-case run keeps the lower-case letters after it and a contraction, digits in threes,
// "/" keeps the line break after it.
TEST(BpePreTokenizer, Gpt4oSplitsCaseRunsAsO200kDoes) {
  ASSERT_TRUE(pre_tokenizer_info("gpt-4o").ok()) << pre_tokenizer_info("gpt-4o").message();
  using V = std::vector<std::string>;
  EXPECT_EQ(split_with("gpt-4o", "CamelCaseHTTPServer's 12345 path/\n"),
            (V{"Camel", "Case", "HTTPServer's", " ", "123", "45", " path", "/\n"}));
  EXPECT_TRUE(pre_tokenizer_info("gpt-4o")->ignore_merges);
}

// SmolLM / SmolLM2 ("smollm"): every digit alone, then GPT-2's pattern.
TEST(BpePreTokenizer, SmollmSplitsDigitsThenAsGpt2) {
  ASSERT_TRUE(pre_tokenizer_info("smollm").ok()) << pre_tokenizer_info("smollm").message();
  using V = std::vector<std::string>;
  EXPECT_EQ(split_with("smollm", "abc 123 WE'LL"),
            (V{"abc", " ", "1", "2", "3", " WE", "'", "LL"}));
}

TEST(BpeAddedTokens, LeftmostLongestAndParseSpecial) {
  ToyBpe t;
  t.add("<|a|>", TokenType::Control);
  const int32_t a = int32_t(t.v.pieces.size()) - 1;
  t.add("<|a|>b", TokenType::Control);  // longer, same start
  const int32_t ab = a + 1;
  t.add("<think>", TokenType::UserDefined);
  const int32_t think = a + 2;
  auto tok = Tokenizer::from_vocab(t.v);
  ASSERT_TRUE(tok.ok());
  const auto with = [&](const std::string& s, bool special) {
    return tok->tokenize(s, {.add_special = false, .parse_special = special});
  };
  EXPECT_EQ(with("<|a|>b", true), std::vector<int32_t>{ab});
  EXPECT_EQ(with("x<|a|><think>", true), (std::vector<int32_t>{int32_t('x'), a, think}));
  // parse_special off: control tokens are text, user-defined ones are still split out
  std::vector<int32_t> plain = with("<|a|><think>", false);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain.back(), think);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), a), 0);
  EXPECT_EQ(tok->decode_all(plain), "<|a|><think>");
  EXPECT_EQ(tok->decode_all(with("<|a|>", true)), "");  // control tokens print nothing
  EXPECT_EQ(tok->piece(a), "<|a|>");
}

TEST(BpeNormalization, QwenIsNfcLlama3IsNot) {
  EXPECT_EQ(nfc_normalize("e\xCC\x81"), "\xC3\xA9");         // e + U+0301 -> é
  EXPECT_EQ(nfc_normalize("\xE2\x84\xAB"), "\xC3\x85");      // Ångström sign -> Å
  EXPECT_EQ(nfc_normalize("\xEF\xAC\x81"), "\xEF\xAC\x81");  // ﬁ: compatibility, not NFC
  ToyBpe t;
  t.v.pre = "qwen2";
  auto qwen = Tokenizer::from_vocab(t.v);
  t.v.pre = "llama3";
  auto llama3 = Tokenizer::from_vocab(t.v);
  ASSERT_TRUE(qwen.ok() && llama3.ok());
  EXPECT_EQ(qwen->encode_raw("cafe\xCC\x81"), qwen->encode_raw("caf\xC3\xA9"));
  EXPECT_NE(llama3->encode_raw("cafe\xCC\x81"), llama3->encode_raw("caf\xC3\xA9"));
}

// Words are cut one at a time: a callback that stops is not called again.
TEST(BpePreTokenizer, ForEachWordStopsWhenAsked) {
  auto pre = PreTokenizer::create(*pre_tokenizer_info("qwen2"));
  ASSERT_TRUE(pre.ok());
  std::string text;
  for (int i = 0; i < 20000; ++i) text += " word" + std::to_string(i % 7) + "\n";
  std::vector<std::string_view> all;
  (*pre)->split(text, all);
  std::vector<std::string_view> seen;
  const bool finished = (*pre)->for_each_word(text, [&](std::string_view w) {
    seen.push_back(w);
    return seen.size() < 5;
  });
  EXPECT_FALSE(finished);
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_TRUE(std::equal(seen.begin(), seen.end(), all.begin()));
}

// With a limit, encoding stops after the first word past it, and what it made is the start of
// the whole encoding: the server refuses a prompt too long for the context after cutting about a
// context of it, not the whole text.
TEST(BpeEncode, LimitGivesAPrefixJustPastIt) {
  ToyBpe t;
  t.merge("w", "o");
  t.merge("wo", "r");
  t.merge(" ", "wor");
  t.merge("d", "\n");
  auto tok = Tokenizer::from_vocab(t.v);
  ASSERT_TRUE(tok.ok());
  std::string text;
  for (int i = 0; i < 5000; ++i) text += " word" + std::to_string(i % 10) + "d\n";
  const std::vector<int32_t> all = tok->encode_raw(text);
  for (size_t limit : {size_t(0), size_t(1), size_t(99), size_t(1000)}) {
    const std::vector<int32_t> cut = tok->encode_raw(text, limit);
    EXPECT_GT(cut.size(), limit);
    EXPECT_LE(cut.size(), limit + 8) << "more than one word past the limit";
    EXPECT_TRUE(std::equal(cut.begin(), cut.end(), all.begin())) << limit;
  }
  EXPECT_EQ(tok->encode_raw(text, all.size()), all);  // a limit it does not pass changes nothing
}

TEST(BpeEncode, IllFormedUtf8IsReadAsReplacementCharacters) {
  ToyBpe t;
  auto tok = Tokenizer::from_vocab(t.v);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->decode_all(tok->encode_raw("a\xFF"
                                            "b\xE2\x82")),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD");  // one per byte
}

TEST(TokenizerGguf, BpeRoundTrip) {
  ToyBpe t;
  t.merge("a", "b");
  t.merge("ab", "c");
  t.add("<|im_end|>", TokenType::Control);
  t.add("<tool>", TokenType::UserDefined);
  t.v.pre = "qwen2";
  t.v.eos = int32_t(t.v.pieces.size()) - 2;
  t.v.add_bos = false;
  t.v.chat_template = "{{ messages }}";
  GgufWriter w;
  write_tokenizer_gguf(w, t.v);
  const std::string path = unique_temp("kamera_bpe_roundtrip.gguf");
  ASSERT_TRUE(w.write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  auto tok = tokenizer_from_gguf(**f);
  ASSERT_TRUE(tok.ok()) << tok.message();
  auto direct = Tokenizer::from_vocab(t.v);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(tok->kind(), VocabKind::Bpe);
  EXPECT_EQ(tok->vocab().pre, "qwen2");
  const auto* merges = (*f)->get_string_array("tokenizer.ggml.merges");
  ASSERT_NE(merges, nullptr);
  EXPECT_EQ(*merges, t.v.merges);
  EXPECT_TRUE(tok->vocab().merges.empty()) << "the merge table holds them";
  EXPECT_EQ(tok->vocab().chat_template, "{{ messages }}");
  EXPECT_FALSE(tok->add_bos());
  EXPECT_TRUE(tok->is_eog(t.v.eos));
  const std::string s = "abc abcab <|im_end|><tool> x";
  EXPECT_EQ(tok->encode_raw(s), direct->encode_raw(s));
  EXPECT_EQ(tok->decode_all(tok->tokenize(s, {.add_special = false, .parse_special = false})), s);
  std::remove(path.c_str());
}

TEST(HfImport, ReadsVocabularyMergesAddedTokensAndConfig) {
  const std::string tj = R"({
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]},
    "decoder": {"type": "ByteLevel"},
    "added_tokens": [
      {"id": 6, "content": "<s>", "special": true},
      {"id": 8, "content": "<think>", "special": false}],
    "model": {"type": "BPE", "byte_fallback": false,
      "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġa": 4, "Ġ b": 5},
      "merges": [["a", "b"], ["Ġ", "a"], [" ", "b"]]}})";
  const std::string cfg = R"({"eos_token": "<s>", "chat_template": "{{ x }}"})";
  auto v = import_hf_tokenizer_text(tj, cfg, "test.json");
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(v->kind, VocabKind::Bpe);
  EXPECT_EQ(v->pre, "qwen2");
  ASSERT_EQ(v->pieces.size(), 9u);  // ids 0..8; id 7 unused
  EXPECT_EQ(v->pieces[7], "[PAD7]");
  EXPECT_EQ(v->types[7], TokenType::Unused);
  EXPECT_EQ(v->types[6], TokenType::Control);
  EXPECT_EQ(v->types[8], TokenType::UserDefined);
  EXPECT_EQ(v->merges, (std::vector<std::string>{"a b", "Ġ a", "Ġ b"}));  // space -> U+0120
  EXPECT_EQ(v->eos, 6);
  EXPECT_EQ(v->bos, 6);  // from the TemplateProcessing post-processor
  EXPECT_TRUE(v->add_bos);
  EXPECT_EQ(v->chat_template, "{{ x }}");
  // An unknown pre-tokenizer is refused with the names kamera knows, unless one is named.
  std::string other = tj;
  other.replace(other.find("\\\\p{N}|"), 7, "\\\\p{N}{1,5}|");
  auto bad = import_hf_tokenizer_text(other, "", "test.json");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("llama3"), std::string::npos) << bad.message();
  EXPECT_TRUE(import_hf_tokenizer_text(other, "", "test.json", "llama3").ok());
}

TEST(TokenizerEog, EndOfGenerationSet) {
  ToyBpe t;
  t.add("<|endoftext|>", TokenType::Control);
  t.add("<|im_end|>", TokenType::Control);
  t.add("<|im_start|>", TokenType::Control);
  const int32_t n = int32_t(t.v.pieces.size());
  t.v.eos = n - 2;
  auto tok = Tokenizer::from_vocab(t.v);
  ASSERT_TRUE(tok.ok());
  EXPECT_TRUE(tok->is_eog(n - 3));
  EXPECT_TRUE(tok->is_eog(n - 2));
  EXPECT_FALSE(tok->is_eog(n - 1));
  EXPECT_FALSE(tok->is_eog(0));
  EXPECT_EQ(tok->bos(), n - 2);  // no BOS, no PAD: EOS stands in as the anchor
}

TEST(Utf8Stream, NeverEmitsABrokenCharacter) {
  const std::string text = "héllo 世界 🦙🚀 naïve Ω x";
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    Utf8Stream s;
    std::string out;
    size_t i = 0;
    while (i < text.size()) {
      const size_t n = std::min(text.size() - i, size_t(1 + rng() % 4));
      const std::string got = s.push(std::string_view(text).substr(i, n));
      EXPECT_TRUE(utf8_is_valid(got));
      out += got;
      i += n;
    }
    out += s.flush();
    EXPECT_EQ(out, text);
  }
  Utf8Stream s;  // bytes that can never finish a character come out as U+FFFD at once
  EXPECT_EQ(s.push("a\xFF"), "a\xEF\xBF\xBD");
  EXPECT_EQ(s.push("\xE4\xB8"), "");
  EXPECT_EQ(s.pending(), 2u);
  EXPECT_EQ(s.push("x"), "\xEF\xBF\xBD\xEF\xBF\xBDx");
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace kamera
