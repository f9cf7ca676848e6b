// The generation loop (generate/generator.h) on a small hand-made vocabulary, driven by logits
// that pick the next token: stop strings held back across token boundaries and cut exactly,
// characters split across byte tokens, the end-of-generation set, limits, cancellation, special
// tokens, log-probabilities and the token-constraint hook.
#include <gtest/gtest.h>

#include <cmath>

#include "generate/generator.h"
#include "generate/stop_text.h"

using namespace kamera;

namespace {

enum : int32_t { kHe = 3, kLlo, kWo, kRld, kE2, k82, kAC, kEot, kImStart, kBang, kFim, kN };

Tokenizer vocab() {
  Vocab v;
  v.pieces = {"<unk>", "<s>",    "</s>",   "He",         "llo",          "\xe2\x96\x81wo",
              "rld",   "<0xE2>", "<0x82>", "<|eot_id|>", "<|im_start|>", "!"};
  v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control, TokenType::Normal,
             TokenType::Normal,  TokenType::Normal,  TokenType::Normal,  TokenType::Byte,
             TokenType::Byte,    TokenType::Control, TokenType::Control, TokenType::Normal};
  v.pieces.insert(v.pieces.begin() + kAC, "<0xAC>");
  v.types.insert(v.types.begin() + kAC, TokenType::Byte);
  v.pieces.push_back("<|fim_middle|>");  // user-defined in Qwen's GGUFs, control-looking
  v.types.push_back(TokenType::UserDefined);
  v.scores.assign(v.pieces.size(), 0.0f);
  auto t = Tokenizer::from_vocab(v);
  EXPECT_TRUE(t.ok()) << t.message();
  return std::move(t.value());
}

// Logits that make `token` the argmax, with a spread below it (for log-probabilities).
std::vector<float> pick(int32_t token) {
  std::vector<float> l(kN);
  for (int i = 0; i < kN; ++i) l[i] = -0.1f * float(i);
  l[size_t(token)] = 5.0f;
  return l;
}

struct Drive {
  std::vector<std::string> pieces;  // what was shown, step by step
  std::string shown;
  std::vector<TokenLogprob> logprobs;
  GenStep last;
};

// Feeds the tokens in order (one step each) until the loop is done or the tokens run out.
Drive drive(Generator& g, const std::vector<int32_t>& tokens) {
  Drive r;
  for (int32_t t : tokens) {
    std::vector<float> l = pick(t);
    r.last = g.step(l);
    r.pieces.push_back(r.last.text);
    r.shown += r.last.text;
    for (auto& e : r.last.logprobs) r.logprobs.push_back(e);
    if (r.last.done) break;
  }
  return r;
}

GenerateParams greedy(int max_tokens = 100) {
  GenerateParams p;
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0;
  return p;
}

}  // namespace

TEST(StopText, HoldsBackAPossibleStopAndCutsExactlyBeforeIt) {
  StopText s({"lo w", "XYZ"});
  EXPECT_EQ(s.push("Hel"), "He");  // "l" may begin "lo w"
  EXPECT_EQ(s.push("lo"), "l");    // "lo" may, the first "l" may not
  EXPECT_EQ(s.push(" wor"), "");   // the stop: cut before it
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.text(), "Hel");
  EXPECT_EQ(s.push("more"), "");
  EXPECT_EQ(s.text(), "Hel");
}

TEST(StopText, APrefixThatIsNotAStopIsShownAndTheEarliestStopWins) {
  StopText s({"abc", "cd"});
  EXPECT_EQ(s.push("xab"), "x");
  EXPECT_EQ(s.push("x"), "abx");  // "abx" is no stop: all of it shows
  EXPECT_EQ(s.push("abcd"), "");  // "abc" at 3 comes before "cd" at 5
  EXPECT_EQ(s.text(), "xabx");
  StopText t({"END"});
  EXPECT_EQ(t.push("the E"), "the ");
  EXPECT_EQ(t.flush(), "E");  // no stop came: the held text belongs to the completion
  EXPECT_FALSE(t.stopped());
}

TEST(Generator, StopStringAcrossTokensIsHeldBackAndCutExactly) {
  const Tokenizer tok = vocab();
  GenerateParams p = greedy();
  p.stop = {"lo w"};
  Generator g(&tok, p);
  Drive r = drive(g, {kHe, kLlo, kWo, kRld, kBang});
  ASSERT_TRUE(r.last.done);
  EXPECT_EQ(r.last.reason, FinishReason::Stop);
  EXPECT_EQ(r.shown, "Hel");
  EXPECT_EQ(g.text(), "Hel");
  for (const std::string& piece : r.pieces) EXPECT_EQ(piece.find('o'), std::string::npos) << piece;
  EXPECT_EQ(r.pieces.size(), 3u);  // it stopped at the token that completed the stop
  EXPECT_EQ(g.tokens().size(), 3u);
}

TEST(Generator, CharactersSplitAcrossByteTokensAreShownWhole) {
  const Tokenizer tok = vocab();
  Generator g(&tok, greedy(4));
  Drive r = drive(g, {kE2, k82, kAC, kBang});
  EXPECT_EQ(r.pieces, (std::vector<std::string>{"", "", "\xe2\x82\xac", "!"}));
  EXPECT_EQ(r.last.reason, FinishReason::Length);
  // cut short inside a character, the loop ends with a replacement character, never bad UTF-8
  Generator h(&tok, greedy(2));
  Drive s = drive(h, {kE2, k82});
  EXPECT_TRUE(utf8_is_valid(s.shown));
  EXPECT_EQ(s.shown, "\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(Generator, TheEndOfGenerationSetEndsTheTurnUncounted) {
  const Tokenizer tok = vocab();
  ASSERT_TRUE(tok.is_eog(kEot));  // <|eot_id|> by its text, as llama.cpp
  Generator g(&tok, greedy());
  Drive r = drive(g, {kHe, kEot, kBang});
  EXPECT_TRUE(r.last.done);
  EXPECT_EQ(r.last.reason, FinishReason::Stop);
  EXPECT_EQ(r.shown, "He");
  EXPECT_EQ(g.tokens(), std::vector<int32_t>{kHe});
  GenerateParams p = greedy(3);
  p.ignore_eog = true;
  Generator past(&tok, p);
  Drive q = drive(past, {kHe, kEot, kBang});
  EXPECT_EQ(q.last.reason, FinishReason::Length);
  EXPECT_EQ(q.shown, "He!");  // a control token prints nothing
}

TEST(Generator, SpecialTokensPrintOnlyWhenAsked) {
  const Tokenizer tok = vocab();
  Generator plain(&tok, greedy(2));
  EXPECT_EQ(drive(plain, {kImStart, kHe}).shown, "He");
  GenerateParams p = greedy(2);
  p.special = true;
  Generator special(&tok, p);
  EXPECT_EQ(drive(special, {kImStart, kHe}).shown, "<|im_start|>He");
}

// The terminal chat (text_only): a user-defined token spelled like a control token prints
// nothing unless special tokens are asked for; the server's default prints it as its text.
TEST(Generator, ControlLookingUserTokensHiddenInTextOnlyMode) {
  const Tokenizer tok = vocab();
  Generator plain(&tok, greedy(2));
  EXPECT_EQ(drive(plain, {kFim, kHe}).shown, "<|fim_middle|>He");
  GenerateParams p = greedy(2);
  p.text_only = true;
  Generator text_only(&tok, p);
  EXPECT_EQ(drive(text_only, {kFim, kHe}).shown, "He");
  p.special = true;
  Generator special(&tok, p);
  EXPECT_EQ(drive(special, {kFim, kHe}).shown, "<|fim_middle|>He");
}

TEST(Generator, LimitsAndCancellation) {
  const Tokenizer tok = vocab();
  Generator none(&tok, greedy(0));
  EXPECT_EQ(drive(none, {kHe}).last.reason, FinishReason::Length);
  EXPECT_TRUE(none.tokens().empty());
  std::atomic<bool> cancel{false};
  Generator g(&tok, greedy(), {}, nullptr, &cancel);
  EXPECT_FALSE(drive(g, {kHe}).last.done);
  cancel = true;
  Drive r = drive(g, {kLlo});
  EXPECT_EQ(r.last.reason, FinishReason::Cancelled);
  EXPECT_EQ(g.text(), "He");
}

TEST(Generator, LogprobsFollowTheShownTextAndAreConsistent) {
  const Tokenizer tok = vocab();
  GenerateParams p = greedy();
  p.stop = {"lo w"};
  p.logprobs = 3;
  Generator g(&tok, p);
  Drive r = drive(g, {kHe, kLlo, kWo, kRld});
  // He and llo have text in "Hel"; " wo" starts after the cut and is not part of the completion
  ASSERT_EQ(r.logprobs.size(), 2u);
  EXPECT_EQ(r.logprobs[0].token, kHe);
  EXPECT_EQ(r.logprobs[1].bytes, "llo");
  for (const TokenLogprob& e : r.logprobs) {
    ASSERT_EQ(e.top.size(), 3u);
    EXPECT_EQ(e.top[0].token, e.token);  // greedy: the chosen token is the most likely
    EXPECT_FLOAT_EQ(e.top[0].logprob, e.logprob);
    EXPECT_LE(e.logprob, 0.0f);
    EXPECT_GE(e.top[0].logprob, e.top[1].logprob);
    EXPECT_GE(e.top[1].logprob, e.top[2].logprob);
  }
  // against an independent log-softmax of the same logits
  const std::vector<float> l = pick(kHe);
  double z = 0;
  for (float v : l) z += std::exp(double(v));
  EXPECT_NEAR(r.logprobs[0].logprob, double(l[kHe]) - std::log(z), 1e-5);
}

TEST(Generator, LogitBiasAndPenaltiesMoveTheChoice) {
  const Tokenizer tok = vocab();
  GenerateParams p = greedy(1);
  p.logit_bias = {{kBang, 100.0f}};
  Generator g(&tok, p);
  EXPECT_EQ(drive(g, {kHe}).shown, "!");
  // He was in the prompt: a strong repeat penalty moves the choice off it
  GenerateParams q = greedy(1);
  q.penalties.presence = 10.0f;
  const std::vector<int32_t> history = {kHe};
  Generator h(&tok, q, history);
  std::vector<float> l = pick(kHe);
  l[kLlo] = 4.0f;
  EXPECT_EQ(h.step(l).token, kLlo);
}

namespace {

// Allows only the tokens of `word` in order, then only the end of the turn (<|eot_id|>).
class Only : public TokenConstraint {
 public:
  explicit Only(std::vector<int32_t> word) : word_(std::move(word)) {}
  void mask(std::span<float> logits) override {
    ++masks;
    const int32_t allowed = complete() ? kEot : word_[at_];
    for (size_t i = 0; i < logits.size(); ++i)
      if (int32_t(i) != allowed) logits[i] = -INFINITY;
  }
  Status accept(int32_t token) override {
    if (token != (complete() ? kEot : word_[at_]))
      return make_error(ErrorCode::InvalidArgument, "token {} was masked", token);
    if (!complete()) ++at_;
    return Status::Ok();
  }
  bool complete() const override { return at_ == word_.size(); }
  int masks = 0;

 private:
  std::vector<int32_t> word_;
  size_t at_ = 0;
};

// Masks nothing and refuses every token.
class Refuses : public TokenConstraint {
 public:
  void mask(std::span<float>) override {}
  Status accept(int32_t) override { return make_error(ErrorCode::InvalidArgument, "no"); }
  bool complete() const override { return false; }
};

}  // namespace

TEST(Generator, TheConstraintMasksBeforeSamplingAndTheTextEndsOnlyWhenComplete) {
  const Tokenizer tok = vocab();
  Only only({kHe, kLlo});
  Generator g(&tok, greedy(), {}, &only);
  // The model wants "!" and would end at once; the constraint allows neither until complete.
  Drive r = drive(g, {kBang, kEot, kBang, kBang});
  EXPECT_EQ(r.shown, "Hello");
  EXPECT_TRUE(r.last.done);
  EXPECT_EQ(r.last.reason, FinishReason::Stop);
  EXPECT_EQ(r.last.token, kEot);
  EXPECT_EQ(only.masks, 3);  // He, llo, then only the end of the turn
}

TEST(Generator, AConstraintThatCannotFollowEndsTheGeneration) {
  const Tokenizer tok = vocab();
  Refuses refuses;
  Generator g(&tok, greedy(), {}, &refuses);
  std::vector<float> l = pick(kHe);
  GenStep s = g.step(l);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.reason, FinishReason::Stop);
  EXPECT_TRUE(g.tokens().empty());
}

TEST(Generator, RunGenerationForwardsEveryTokenButTheLast) {
  const Tokenizer tok = vocab();
  Generator g(&tok, greedy(3));
  std::vector<int32_t> forwarded;
  std::string shown;
  const std::vector<int32_t> script = {kHe, kLlo, kBang};
  auto end = run_generation(
      g, pick(script[0]),
      [&](int32_t t) -> Result<std::vector<float>> {
        forwarded.push_back(t);
        return pick(script[forwarded.size()]);
      },
      [&](std::string_view t) { shown += t; });
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(*end, FinishReason::Length);
  EXPECT_EQ(forwarded, (std::vector<int32_t>{kHe, kLlo}));
  EXPECT_EQ(shown, "Hello!");
}
