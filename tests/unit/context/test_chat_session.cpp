// ChatSession (the conversation kept in the KV cache between turns) and the `kamera chat` REPL,
// on a tiny synthetic model with the chatml built-in template. The reference for every reply is
// the same conversation prefilled from scratch each turn (reuse_cache = false), greedy.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "context/chat_session.h"
#include "support/chat_templates.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

struct Chat {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<ChatSession> s;
  Chat(const std::string& model, bool reuse, int max_tokens = 6,
       ReusePolicy policy = ReusePolicy::Prefix) {
    ctx = tiny::context(model, 2048);
    ChatOptions o;
    o.gen.max_tokens = max_tokens;
    o.reuse_cache = reuse;
    o.policy = policy;
    auto t = ChatTemplate::named("chatml");
    EXPECT_TRUE(t.ok());
    auto c = ChatSession::create(*ctx, std::move(t.value()), o);
    EXPECT_TRUE(c.ok()) << c.message();
    s = std::move(c.value());
  }
  std::string say(const std::string& text, TurnStats* st = nullptr) {
    auto r = s->reply(text, {}, st);
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : "";
  }
};

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

// Each turn prefills only what follows the cached prefix, and replies exactly as a session that
// prefills the whole conversation every turn; the streamed pieces add up to the reply.
TEST(ChatSession, TurnsReuseTheCacheAndReplyAsAFullPrefill) {
  const std::string model = tiny::model_path("llama");
  Chat cached(model, true), fresh(model, false);
  cached.s->set_system("You are a terse assistant.");
  fresh.s->set_system("You are a terse assistant.");
  int prev_cached = 0;
  for (const char* msg : {"Once upon a time", "what happened next?", "and then"}) {
    SCOPED_TRACE(msg);
    TurnStats st, st_fresh;
    std::string streamed;
    auto r = cached.s->reply(
        msg, [&](std::string_view t) { streamed += t; }, &st);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(streamed, *r);
    EXPECT_EQ(*r, fresh.say(msg, &st_fresh));
    EXPECT_EQ(st_fresh.reused_tokens, 0);
    EXPECT_EQ(st.prompt_tokens, st_fresh.prompt_tokens);
    // the previous turn's tokens stay cached up to where the new rendering departs from them
    EXPECT_GE(st.reused_tokens, prev_cached * 8 / 10) << "prompt " << st.prompt_tokens;
    EXPECT_LE(st.generated_tokens, 6);
    prev_cached = int(cached.s->cached_tokens().size());
    EXPECT_EQ(prev_cached, st.prompt_tokens + std::max(0, st.generated_tokens - 1));
  }
  EXPECT_EQ(cached.s->messages().size(), 7u);  // system + 3 x (user, assistant)
}

// A changed system message, under the exact policy prefix: the cache is cut at the first token
// that differs and refilled from there, and the reply is still the full prefill's.
TEST(ChatSession, ChangedPrefixRefillsFromTheFirstDifference) {
  const std::string model = tiny::model_path("llama");
  Chat cached(model, true), fresh(model, false);
  for (Chat* c : {&cached, &fresh}) c->s->set_system("Answer in English.");
  EXPECT_EQ(cached.say("tell me a story"), fresh.say("tell me a story"));
  const std::vector<int32_t> before(cached.s->cached_tokens().begin(),
                                    cached.s->cached_tokens().end());
  for (Chat* c : {&cached, &fresh}) c->s->set_system("Answer briefly.");
  TurnStats st;
  EXPECT_EQ(cached.say("go on", &st), fresh.say("go on"));
  const auto after = cached.s->cached_tokens().first(size_t(st.prompt_tokens));
  EXPECT_EQ(size_t(st.reused_tokens), common_prefix(before, after));
  EXPECT_LT(st.reused_tokens, st.prompt_tokens / 2);  // the system message is at the front
}

// The same edit under the default policy patch: past the exact prefix, the messages seen in the
// earlier context are served from their KV there (the nearest context: the system message
// differs), so more of the prompt is reused than the prefix, and the spans say where it came from.
TEST(ChatSession, ChangedPrefixServesTheLaterMessagesFromTheirEarlierContext) {
  const std::string model = tiny::model_path("llama");
  Chat c(model, true, 6, ReusePolicy::Patch);
  c.s->set_system("Answer in English.");
  c.say("tell me a story about a cat that lived in a small house by the sea");
  const std::vector<int32_t> before(c.s->cached_tokens().begin(), c.s->cached_tokens().end());
  c.s->set_system("Answer briefly.");
  TurnStats st;
  c.say("go on", &st);
  const auto after = c.s->cached_tokens().first(size_t(st.prompt_tokens));
  EXPECT_GT(size_t(st.reused_tokens), common_prefix(before, after));
  int64_t from_context = 0, total = 0;
  for (const ServedSegment& s : st.spans) {
    total += s.tokens;
    if (s.source == SpanSource::ContextNearest) from_context += s.tokens;
  }
  const int anchor = c.ctx->cache().anchor_extent();  // cached, in no span
  EXPECT_EQ(total + anchor, st.prompt_tokens);
  EXPECT_GT(from_context, 0);
  EXPECT_EQ(
      st.reused_tokens, int(total) + anchor - [&] {
        int64_t n = 0;
        for (const ServedSegment& s : st.spans)
          n += s.source == SpanSource::Recomputed ? s.tokens : 0;
        return int(n);
      }());
}

// /reset forgets the turns: the first message again gives the first reply, and its whole prompt
// (a prefix of what is cached) comes from the cache but its last token.
TEST(ChatSession, ResetForgetsTheTurnsButKeepsTheCache) {
  Chat c(tiny::model_path("llama"), true);
  const std::string first = c.say("hello");
  c.say("more please");
  c.s->reset();
  EXPECT_TRUE(c.s->messages().empty());
  TurnStats st;
  EXPECT_EQ(c.say("hello", &st), first);
  EXPECT_EQ(st.reused_tokens, st.prompt_tokens - 1);
}

TEST(ChatSession, FailedTurnLeavesTheConversationAsItWas) {
  Chat c(tiny::model_path("llama"), true);
  c.say("hello");
  const auto msgs = c.s->messages().size();
  const auto cached = c.s->cached_tokens().size();
  std::string huge;
  for (int i = 0; i < 400; ++i) huge += "once upon a time ";
  auto r = c.s->reply(huge);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("context"), std::string::npos) << r.message();
  EXPECT_EQ(c.s->messages().size(), msgs);
  EXPECT_EQ(c.s->cached_tokens().size(), cached);
  TurnStats st;
  c.say("again", &st);
  EXPECT_GT(st.reused_tokens, 0);
}

namespace {

struct CliRun {
  std::string out, err;
  int rc = -1;
};

CliRun run_chat(const std::string& input, const std::string& args) {
  const std::string dir = unique_temp("");
  const std::string in = dir + "kamera-chat.in", err = dir + "kamera-chat.err";
  std::ofstream(in) << input;
  const std::string cmd =
      std::string(KAMERA_BINARY_DIR) + "/bin/kamera chat " + args + " <" + in + " 2>" + err;
  CliRun r;
  FILE* f = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  for (size_t n; f && (n = fread(buf.data(), 1, buf.size(), f)) > 0;) r.out.append(buf.data(), n);
  r.rc = f ? pclose(f) : -1;
  std::ifstream e(err);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

}  // namespace

// Driven by a pipe: three replies (the third message starts with '/', escaped as '//'), the
// commands act, nothing after /quit runs, and the cached run prints what the full-prefill run
// prints.
TEST(ChatCli, PipedConversation) {
  const std::string model = tiny::model_path("llama");
  const std::string input =
      "Once upon a time\nwhat next?\n/system Be brief.\n/image cat.png\n/bogus\n//slash\n/quit\n"
      "never read\n";
  const std::string args = "-m " + model + " --chat-template chatml --temp 0 -n 5 -t 1 -v";
  const CliRun a = run_chat(input, args + " --reuse prefix"),
               b = run_chat(input, args + " --no-cache-reuse");
  ASSERT_EQ(a.rc, 0) << a.err;
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(std::count(a.out.begin(), a.out.end(), '\n'), 3) << a.out;
  EXPECT_NE(a.err.find("turn 3:"), std::string::npos) << a.err;
  EXPECT_EQ(a.err.find("turn 4:"), std::string::npos) << a.err;
  EXPECT_NE(
      a.err.find("/image cat.png: images need a vision tower: start kamera chat with --mmproj"),
      std::string::npos)
      << a.err;
  EXPECT_NE(a.err.find("unknown command /bogus"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("system message set"), std::string::npos) << a.err;
  // turn 2 reuses at least turn 1's whole prompt from the cache (the random model's reply is
  // byte tokens that re-tokenize differently, so not always the reply); the full-prefill run
  // reuses nothing
  const size_t t1 = a.err.find("turn 1:"), t2 = a.err.find("turn 2:");
  ASSERT_NE(t1, std::string::npos);
  ASSERT_NE(t2, std::string::npos);
  int prompt1 = 0, prompt = 0, reused = 0;
  ASSERT_EQ(std::sscanf(a.err.c_str() + t1, "turn 1: prompt %d tokens", &prompt1), 1);
  ASSERT_EQ(
      std::sscanf(a.err.c_str() + t2, "turn 2: prompt %d tokens, %d reused", &prompt, &reused), 2);
  EXPECT_GT(prompt1, 0);
  EXPECT_GE(reused, prompt1);
  EXPECT_LT(reused, prompt);
  // -v names where each run came from: turn 2's prompt starts with the exact prefix, of the
  // tokens it reused
  const size_t served2 = a.err.find("served: ", t2);
  ASSERT_NE(served2, std::string::npos) << a.err;
  int prefix_tokens = 0;
  ASSERT_EQ(std::sscanf(a.err.c_str() + served2, "served: prefix %d", &prefix_tokens), 1) << a.err;
  EXPECT_EQ(prefix_tokens + 1, reused) << "the anchor counts as reused, not as the prefix's";
  EXPECT_NE(b.err.find("turn 2: prompt " + std::to_string(prompt) + " tokens, 0 reused"),
            std::string::npos)
      << b.err;
}

namespace {

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \n\t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \n\t\r") - b + 1);
}

}  // namespace

// A thinking template that opens <think> in the generation prompt (Qwen3's, as Qwen3-Thinking's
// and DeepSeek-R1's do): the reply starts inside the reasoning. The reference is the reply as the
// model wrote it (--reasoning raw): shown, its reasoning is printed with every line prefixed by
// "| " and nothing of it as the answer; hidden, nothing is printed.
TEST(ChatCli, ReasoningIsShownAboveTheAnswerOrHidden) {
  const std::string model = tiny::model_path("qwen2", DType::F32, "ctx=4096");
  const std::string args =
      "-m " + model + " --chat-template " + tiny::thinking_template() + " --temp 0 -n 24 -t 1";
  const CliRun raw = run_chat("What is 2 + 2?\n", args + " --reasoning raw");
  ASSERT_EQ(raw.rc, 0) << raw.err;
  ASSERT_EQ(raw.out.back(), '\n');
  const std::string reply = raw.out.substr(0, raw.out.size() - 1);
  const std::string reasoning = trimmed(reply);
  ASSERT_FALSE(reasoning.empty());
  ASSERT_EQ(reply.find("</think>"), std::string::npos) << "a random model never closes it";
  std::string quoted = "| ";
  for (char c : reasoning) quoted += c == '\n' ? std::string("\n| ") : std::string(1, c);
  const CliRun shown = run_chat("What is 2 + 2?\n", args);
  ASSERT_EQ(shown.rc, 0) << shown.err;
  EXPECT_EQ(shown.out, quoted + "\n");
  const CliRun hidden = run_chat("What is 2 + 2?\n", args + " --reasoning hide");
  ASSERT_EQ(hidden.rc, 0) << hidden.err;
  EXPECT_EQ(hidden.out, "\n");
}
