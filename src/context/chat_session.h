// A multi-turn chat over a Context: each turn's prompt is served by the context's prompt
// assembler (cache/prompt_assembler.h), as the server serves a request, so each turn forwards
// only what the caches do not hold.
//
// Every turn renders the whole conversation with the chat template (add_generation_prompt),
// tokenizes it and cuts it into segments (one per message, cache/prompt_plan.h). The assembler
// serves the longest exact token prefix it holds (usually the whole previous conversation and
// its reply: the new turn only appends), then, under the patch policy, each later segment it saw
// in an earlier context (a conversation whose history was edited or slid keeps its survivors'
// KV, conditioned on the nearest context they were seen in: not exact, measured in
// docs/RESULTS.md), and prefills the rest. Where the prefix ends early (the template rewrote an
// earlier turn, the system message changed, the reply re-tokenizes differently from the sampled
// ids) the exact prefix stops at the first differing token. TurnStats::spans says where each run
// of the prompt came from (`kamera chat -v`). The reuse policy prefix keeps to the exact prefix
// (a turn then replies exactly as a full prefill), reprefill forwards everything.
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
  // false: prefill the whole conversation every turn (for checks): the policy reprefill.
  bool reuse_cache = true;
  // How a turn reuses cached KV (cache/reuse_policy.h): patch (the prefix, then segments seen in
  // other contexts), prefix (exact only), keep, blind or reprefill.
  ReusePolicy policy = ReusePolicy::Patch;
  // patch: the share of the tokens served from another context recomputed in context instead
  // (cache/repair_plan.h).
  double reuse_budget = 0;
  // When set and true, the reply being generated stops (finish "cancelled"); what was generated
  // so far stays in the conversation as the assistant's reply. The caller clears it.
  const std::atomic<bool>* cancel = nullptr;
};

struct TurnStats {
  int prompt_tokens = 0;        // the rendered conversation (the context's anchor first)
  int reused_tokens = 0;        // of those, served from the caches without a forward
  int generated_tokens = 0;     // of the reply (the end-of-generation token not counted)
  bool stopped_at_eog = false;  // an end-of-generation token or a stop string ended it
  bool cancelled = false;       // ChatOptions::cancel stopped it
  double prefill_ms = 0, decode_ms = 0;
  std::vector<ServedSegment> spans;  // where each run of the prompt came from (the query last)
};

// Chat messages as token ids: rendered with the template, control tokens read where the text holds
// them (a BOS added when the vocabulary wants one and the template did not write it). The
// options' bos/eos tokens default to the vocabulary's pieces.
Result<std::vector<int32_t>> chat_prompt_ids(const Tokenizer& tok, const ChatTemplate& tmpl,
                                             std::span<const ChatMessage> messages,
                                             ChatRenderOptions opts);

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
  // The tokens whose KV the conversation's sequence holds, in order (the anchor first).
  std::span<const int32_t> cached_tokens() const { return cached_; }
  const ChatTemplate& chat_template() const { return tmpl_; }
  // The prompt the next turn would start from: the conversation rendered with the generation
  // prompt, tokenized.
  Result<std::vector<int32_t>> render_tokens() const;

 private:
  ChatSession(Context& ctx, ChatTemplate tmpl, ChatOptions opts);
  Status prefill(std::span<const int32_t> ids, TurnStats& st, std::vector<float>& logits);
  void keep_turn();
  Result<std::string> generate(std::vector<float> logits,
                               const std::function<void(std::string_view)>& on_text, TurnStats& st);

  Context& ctx_;
  ChatTemplate tmpl_;
  ChatOptions opts_;
  SeqId seq_ = -1;   // the last turn's sequence: its prompt and reply
  PromptPlan plan_;  // the last turn's prompt, and what the assembler made of it
  Assembly assembly_;
  std::string system_;
  std::vector<ChatMessage> turns_;
  std::vector<int32_t> cached_;
};

}  // namespace kamera
