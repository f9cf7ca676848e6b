// What travels between the HTTP side and the scheduler: a parsed completion request, the
// generation the scheduler decodes for it, and the channel of events it answers through.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/prompt_assembler.h"
#include "generate/generator.h"
#include "generate/ngram_draft.h"
#include "grammar/mask_cache.h"
#include "serve/draft_model.h"
#include "serve/events.h"
#include "serve/request_media.h"
#include "toolcall/format.h"
#include "window/window.h"

namespace kamera {

// One piece of a prompt: text, or a reference to a cached chunk; the query (the last part) may be
// token ids instead of text.
struct PromptPart {
  bool is_chunk = false;
  std::string text;
  ChunkId id;
  // Bytes of `text` the chat template wrote (sorted, disjoint): only there are control tokens
  // read; the rest is the client's, literal (server/prompt_parts.h).
  std::vector<TextRange> control;
  std::vector<int32_t> tokens;  // a prompt of token ids (when set, text is empty)
};

struct GenRequest {
  std::vector<PromptPart> parts;  // the last one is the query (text or tokens)
  // gen.max_tokens: 0 when the request named none (to the end of the context); its name
  // ("max_tokens" or "max_completion_tokens") for errors.
  GenerateParams gen;
  const char* max_tokens_field = "max_tokens";
  int default_max_tokens = 0;  // the server's cap when the request names none (0: none)
  int n = 1;            // choices sampled from this prompt (prefilled once, forked per choice)
  int first_index = 0;  // the index of the first choice in the response (a batch of prompts)
  bool chat = false;
  int rank = 32;
  bool deep_half = false;
  bool stream = false;    // answer as server-sent events
  std::string window_id;  // non-empty: generate after this window's content (on a fork)
  std::shared_ptr<RequestMedia> media;  // images of a chat request (their chunk parts' content)
  // Constrained decoding (response_format, a forced or strict tool call: toolcall/request.h):
  // each choice decodes under its own constraint on this grammar, from the moment its output
  // reaches `grammar_trigger` when that is set. Null: no constraint.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::string grammar_trigger;
  // Set: the output is parsed into text and tool calls of this format (the answer's
  // message.tool_calls, streamed as tool-call deltas).
  std::optional<toolcall::Format> tool_calls;
  // Set: a thinking model's reasoning (<think>...</think>) is split out of the output before its
  // tool calls are parsed (toolcall/reasoning.h); true when the prompt opened the reasoning.
  std::optional<bool> reasoning;
  // The prompt as the caches take it (cache/prompt_plan.h), filled where the request was parsed
  // (server/prompt_tokens.h): for a prompt of text and the request's images, its tokens from the
  // anchor on (the prefix index's key) and its segments; the reuse policy for every prompt.
  PromptPlan plan;
};

// Where a generation's events go, in order, called on the scheduler thread (the API layer's
// sink hands them to its own threads at once: server/completion_sink.h).
using EventSink = std::function<void(Event)>;

// A generation being decoded by the scheduler.
struct Generation {
  GenRequest req;
  EventSink out;
  std::string client;  // who asked (API key or peer address): quotas
  std::shared_ptr<std::atomic<bool>> cancelled;
  SeqId seq = -1;                       // the prompt's sequence; choice 0 decodes on it
  std::unique_ptr<Window> window_fork;  // keeps the forked sequence alive
  // One sampled continuation of the prompt: its own sequence (a copy-on-write fork of the
  // prompt's after the prefill) and generation loop.
  struct Choice {
    int index = 0;
    SeqId seq = -1;
    std::unique_ptr<TokenConstraint> constraint;  // the loop's hook (null: none)
    std::unique_ptr<Generator> gen;
    int32_t last = 0;
    int32_t next_pos = 0;
    int64_t untold = 0;  // tokens generated since the last TextDelta (their text held back)
    bool done = false;
    // Speculative decoding (SchedulerOptions::spec): the drafter, and this step's draft (the
    // tokens after `last` checked in the step's forward). Null: plain decoding.
    std::unique_ptr<NgramDrafter> drafter;
    std::unique_ptr<DraftSequence> mirror;  // or the draft model's copy of its sequence
    std::vector<int32_t> draft;
    // The draft's first `walked` tokens came from the constraint (TokenConstraint::forced), the
    // first `forced` of them sure.
    int forced = 0, walked = 0;
  };
  std::vector<Choice> choices;     // those still decoding
  std::vector<int32_t> query_ids;  // the query's tokens (the penalties' history)
  // What the assembler made of the prompt (its spans, and its marks for remember/keep_segments).
  Assembly assembly;
  bool held = false;   // waited in the queue for an admission computing tokens it shares
  int max_tokens = 0;  // resolved at admission
  int generated = 0;   // over all choices
  // Speculative decoding's draft tokens, over all choices: drafted, accepted, and those of the
  // drafted that the constraint forced.
  int64_t drafted = 0, accepted = 0, forced = 0;
  int choices_left = 0;
  std::string stop_sequence;  // the stop string that ended the last choice to end (or none)
  bool over_context = false;  // the prompt (plus max_tokens) does not fit the context
  PromptUsage usage;          // set at admission
  double t_submit = 0, t_admit = 0, t_first = 0;
  std::shared_ptr<void> client_slot;  // the client's count of requests in flight, held till done
};

// A prompt of text (and token) parts only, after no window.
bool text_only(const GenRequest& r);
// A prompt of text and the request's own images and video (no stored chunk parts), after no
// window: the prompts the scheduler serves by segments.
bool text_and_images(const GenRequest& r);
// Whether r's segments hold an image (its prompt_ids then hold -1 for its rows: no prefix reuse).
bool has_images(const GenRequest& r);

// Seconds on a monotonic clock.
double now_s();

}  // namespace kamera
