// A multi-turn chat over one KV sequence of a Context: the conversation's tokens stay cached
// between turns, and each turn forwards only what is new.
//
// Every turn renders the whole conversation with the chat template (add_generation_prompt),
// tokenizes it, and compares the ids with the tokens whose KV the sequence holds. The common
// prefix is kept; the sequence is truncated to it and the rest is prefilled. Usually the prefix
// is the whole previous conversation (the new turn only appends). When it is not, because the
// template rewrites earlier turns (e.g. drops a reasoning block), the system message changed, or
// the reply re-tokenizes differently from the ids that were sampled, the prefill restarts at the
// first differing token, so what the model attends to is always exactly the rendered prompt.
//
//   ChatSession chat(ctx, tmpl, opts);
//   chat.set_system("You are terse.");
//   auto reply = chat.reply("hi", [](std::string_view text) { print(text); });
#pragma once

#include <atomic>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "context/context.h"
#include "generate/generator.h"
#include "jinja/chat_template.h"

namespace kamera {

struct ChatOptions {
  // Per reply: max_tokens, sampling, stop strings, penalties (generate/generator.h); the reply
  // also ends at the model's end-of-generation set and at the end of its context.
  GenerateParams gen;
  // Template variables; bos_token / eos_token default to the vocabulary's pieces.
  ChatRenderOptions render;
  // false: truncate to nothing and prefill the whole conversation every turn (for checks).
  bool reuse_cache = true;
  // When set and true, the reply being generated stops (finish "cancelled"); what was generated
  // so far stays in the conversation as the assistant's reply. The caller clears it.
  const std::atomic<bool>* cancel = nullptr;
};

struct TurnStats {
  int prompt_tokens = 0;        // the rendered conversation
  int reused_tokens = 0;        // of those, already in the cache
  int generated_tokens = 0;     // of the reply (the end-of-generation token not counted)
  bool stopped_at_eog = false;  // an end-of-generation token or a stop string ended it
  bool cancelled = false;       // ChatOptions::cancel stopped it
  double prefill_ms = 0, decode_ms = 0;
};

class ChatSession {
 public:
  // The model must have a tokenizer. Takes one sequence of ctx's pool for its lifetime.
  static Result<std::unique_ptr<ChatSession>> create(Context& ctx, ChatTemplate tmpl,
                                                     ChatOptions opts);
  ~ChatSession();
  ChatSession(const ChatSession&) = delete;
  ChatSession& operator=(const ChatSession&) = delete;

  // Sets (empty: removes) the system message, kept first in the conversation.
  void set_system(std::string text);
  // Forgets the turns, keeps the system message (the cache is reused by prefix as usual).
  void reset();

  // Adds the user's message and generates the reply: `on_text` receives it in pieces of
  // complete UTF-8 characters as they are sampled (never the beginning of a stop string). Stops
  // at the end-of-generation set, a stop string or after max_tokens. On failure the
  // conversation is as before the call.
  Result<std::string> reply(std::string user,
                            const std::function<void(std::string_view)>& on_text = {},
                            TurnStats* stats = nullptr);

  // The conversation as it will be rendered (system message first when set).
  std::vector<ChatMessage> messages() const;
  // Replaces the conversation (a leading system message becomes the system message); the cache
  // keeps what the new conversation shares with it as a prefix.
  void set_messages(std::vector<ChatMessage> messages);
  // The tokens whose KV the sequence holds, in order.
  std::span<const int32_t> cached_tokens() const { return cached_; }
  const ChatTemplate& chat_template() const { return tmpl_; }
  // The prompt the next turn would start from: the conversation rendered with the generation
  // prompt, tokenized.
  Result<std::vector<int32_t>> render_tokens() const;

 private:
  ChatSession(Context& ctx, ChatTemplate tmpl, ChatOptions opts);
  Status prefill(std::span<const int32_t> ids, TurnStats& st, std::vector<float>& logits);
  Result<std::string> generate(std::vector<float> logits,
                               const std::function<void(std::string_view)>& on_text, TurnStats& st);

  Context& ctx_;
  ChatTemplate tmpl_;
  ChatOptions opts_;
  SeqId seq_;
  std::string system_;
  std::vector<ChatMessage> turns_;
  std::vector<int32_t> cached_;
};

}  // namespace kamera
